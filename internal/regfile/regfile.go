// Package regfile reads a file that a user named on the command line or in
// a flag (a config file, a saved smartctl output) without trusting it to
// be one: anything but a regular file is refused before a byte is read, and
// so is a file over the caller's size limit.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped (in an *fs.PathError, as os's errors are) by Read's refusal of a FIFO, device, socket or
// directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by Read's refusal of a file over the limit.
var ErrTooLarge = errors.New("too large")

// Read returns the contents of the regular file at path, at most limit
// bytes. The open never blocks (O_NONBLOCK: opening a FIFO for reading
// otherwise waits for a writer, for ever) and the type is checked on the
// open file, so a file swapped in after a stat is caught too; /dev/zero or
// a FIFO would otherwise be read until memory ran out or for ever.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, kind(st.Mode()))}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: larger than %d bytes", ErrTooLarge, limit)}
	}
	return data, nil
}

// kind names a file type, for a refusal that says what was found.
func kind(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeNamedPipe:
		return "a FIFO"
	case fs.ModeDevice | fs.ModeCharDevice:
		return "a character device"
	case fs.ModeDevice:
		return "a block device"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSocket:
		return "a socket"
	}
	return "of mode " + m.Type().String()
}
