package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readWithin runs Read with a guard: a Read that blocks fails the test
// instead of hanging it.
func readWithin(t *testing.T, path string, limit int64) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := Read(path, limit)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("Read(%s) still blocked after 5 s", path)
		return nil, nil
	}
}

func TestReadRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for path, want := range map[string]string{
		fifo:        "open " + fifo + ": not a regular file: it is a FIFO",
		"/dev/zero": "open /dev/zero: not a regular file: it is a character device",
		dir:         "open " + dir + ": not a regular file: it is a directory",
	} {
		data, err := readWithin(t, path, 1<<20)
		require.EqualError(t, err, want)
		require.True(t, errors.Is(err, ErrNotRegular), path)
		require.Nil(t, data)
	}
	_, err := readWithin(t, filepath.Join(dir, "missing"), 10)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestReadLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, []byte("0123456789"), 0o600))
	data, err := readWithin(t, file, 10)
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(data))
	data, err = readWithin(t, file, 9)
	require.EqualError(t, err, "read "+file+": too large: larger than 9 bytes")
	require.ErrorIs(t, err, ErrTooLarge)
	require.Nil(t, data)
	// A symlink to a regular file is a regular file.
	link := file + ".lnk"
	require.NoError(t, os.Symlink(file, link))
	data, err = readWithin(t, link, 10)
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(data))
}
