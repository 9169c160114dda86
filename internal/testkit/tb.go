package testkit

// TB is what the kit needs of its caller: *testing.T and *testing.B satisfy
// it, and bench's scenario run implements it, so the benches make disks and
// start processes the way the tests do. Fatal, Fatalf, Skip and Skipf must
// not return (testing ends the goroutine; bench unwinds the scenario).
type TB interface {
	Helper()
	Name() string
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Skipf(format string, args ...any)
	TempDir() string
}
