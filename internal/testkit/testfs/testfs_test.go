package testfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// timedSync writes a block and times its fdatasync.
func timedSync(t *testing.T, f *os.File) (time.Duration, error) {
	t.Helper()
	_, err := f.Write(make([]byte, 2300))
	require.NoError(t, err)
	start := time.Now()
	err = unix.Fdatasync(int(f.Fd()))
	return time.Since(start), err
}

func TestInjectedSyncLatencyErrorAndHang(t *testing.T) {
	m := Start(t, "")
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(m.Dir, &st))
	require.EqualValues(t, unix.FUSE_SUPER_MAGIC, st.Type, "mountpoint is a FUSE filesystem")

	f, err := os.Create(filepath.Join(m.Dir, "wal"))
	require.NoError(t, err)
	defer f.Close()

	// The fastest of five: the first fsync through a just-started FUSE
	// server can take a few ms on a busy machine (5.3 ms seen in CI); an
	// injected delay makes every one of them slow.
	fastest := time.Hour
	for range 5 {
		d, err := timedSync(t, f)
		require.NoError(t, err)
		fastest = min(fastest, d)
	}
	require.Less(t, fastest, 5*time.Millisecond, "no delay injected yet")

	m.Do(t, "sync-delay 20ms")
	d, err := timedSync(t, f)
	require.NoError(t, err)
	require.GreaterOrEqual(t, d, 20*time.Millisecond)
	require.Less(t, d, 40*time.Millisecond)

	m.Do(t, "sync-delay 0s")
	m.Do(t, "sync-error EIO")
	_, err = timedSync(t, f)
	require.True(t, errors.Is(err, syscall.EIO), "fdatasync fails with EIO, got %v", err)
	m.Do(t, "sync-error none")

	m.Do(t, "hang")
	done := make(chan error, 1)
	go func() { _, err := timedSync(t, f); done <- err }()
	require.Eventually(t, func() bool {
		_, blocked, err := m.Control.Stats()
		return err == nil && blocked == 1
	}, 5*time.Second, 10*time.Millisecond, "the flush is held")
	select {
	case err := <-done:
		t.Fatalf("held fdatasync returned early: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	m.Do(t, "release")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("fdatasync did not return after release")
	}
	syncs, _, err := m.Control.Stats()
	require.NoError(t, err)
	require.EqualValues(t, 7, syncs, "seven flushes answered: five baseline, the delayed one, the released one (the failed one is not)")
}
