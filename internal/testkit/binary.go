package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sync"
)

// module is the import path the commands are built from.
const module = "github.com/diskcanary/diskcanary"

// binDir holds what this test process built or copied (Build, Reexec): one
// 0755 directory, so that a child dropped to nobody can run what is in it,
// removed by Main when the tests are over.
var binDir struct {
	sync.Mutex
	path  string
	built map[string]*built
	main  bool // Main runs the tests: it removes the directory at the end
}

type built struct {
	once sync.Once
	path string
	err  error
}

// Binary is the diskcanary binary of this checkout; see Build.
func Binary(tb TB) string {
	tb.Helper()
	return Build(tb, "cmd/diskcanary")
}

// Build compiles the command at pkg (a directory of this module, such as
// "cmd/diskcanary") once per test process and returns its path. It is
// built as shipped (CGO_ENABLED=0, static: deploy/build.sh), except that a
// race-detector test binary builds it with -race, which needs cgo: the
// race pass of CI runs the daemon under the detector too. The go command
// is the one `go test` puts first on PATH, so the build cache is shared
// and a rebuild is a link.
func Build(tb TB, pkg string) string {
	tb.Helper()
	E2E(tb) // a test that runs a binary is an end-to-end test
	b := func() *built {
		binDir.Lock()
		defer binDir.Unlock()
		if binDir.built == nil {
			binDir.built = map[string]*built{}
		}
		if binDir.built[pkg] == nil {
			binDir.built[pkg] = &built{}
		}
		return binDir.built[pkg]
	}()
	b.once.Do(func() {
		dir, err := sharedDir()
		if err != nil {
			b.err = err
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			b.err = fmt.Errorf("no go command on PATH to build %s: %w", pkg, err)
			return
		}
		out := filepath.Join(dir, path.Base(pkg))
		args := []string{"build", "-o", out}
		env := append(os.Environ(), "CGO_ENABLED=0")
		if Race {
			args = append(args, "-race")
			env = append(os.Environ(), "CGO_ENABLED=1")
		}
		cmd := exec.Command(goBin, append(args, module+"/"+pkg)...)
		// From the product module's root: tests of the modules beside it
		// (deploy, tools/rulegen) build with the product's go.mod and go.sum.
		cmd.Dir = moduleRoot()
		cmd.Env = env
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
			return
		}
		b.path = out
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// moduleRoot is the product module's directory: this file is in
// internal/testkit.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// sharedDir is binDir's directory, made on first use.
func sharedDir() (string, error) {
	binDir.Lock()
	defer binDir.Unlock()
	if !binDir.main {
		return "", errors.New("testkit: the package's TestMain must be testkit.Main(m), which removes what Build and Reexec leave")
	}
	if binDir.path != "" {
		return binDir.path, nil
	}
	dir, err := os.MkdirTemp("", "diskcanary-test-bin-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		return "", err
	}
	binDir.path = dir
	return dir, nil
}
