package kmsg

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reader reads the kernel's records from the moment it was opened: the
// ring buffer's past is skipped (a restarted daemon must not count it
// again), and a record the kernel overwrote before it was read is counted
// as lost, from the gap in sequence numbers.
type Reader struct {
	f    *os.File
	buf  []byte
	next uint64 // the sequence number expected next; 0 before the first record
	lost uint64
}

// Open opens path (/dev/kmsg) and seeks past every record already logged.
// Where dmesg_restrict=1 it needs CAP_SYSLOG (EPERM otherwise).
func Open(path string) (*Reader, error) {
	// Non-blocking, so the runtime's poller waits for records and Close
	// wakes a pending Read.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	// A record is at most 8 KiB with its dictionary (CONSOLE_EXT_LOG_MAX);
	// read(2) with less fails with EINVAL.
	return &Reader{f: f, buf: make([]byte, 16<<10)}, nil
}

// Next returns the next record, blocking until there is one. Records that
// do not parse are skipped. It returns an error once Close was called.
func (r *Reader) Next() (Record, error) {
	for {
		n, err := r.f.Read(r.buf)
		if errors.Is(err, unix.EPIPE) {
			// The kernel overwrote records we had not read; the next
			// read returns the oldest one left and the gap counts them.
			continue
		}
		if err != nil {
			return Record{}, err
		}
		rec, perr := Parse(r.buf[:n])
		if perr != nil {
			continue
		}
		switch {
		case r.next == 0:
		case rec.Seq < r.next:
			continue // seen already
		case rec.Seq > r.next:
			r.lost += rec.Seq - r.next
		}
		r.next = rec.Seq + 1
		return rec, nil
	}
}

// Lost is how many records the kernel overwrote before they were read.
// Call it from the goroutine that calls Next.
func (r *Reader) Lost() uint64 { return r.lost }

// Close ends a pending or future Next.
func (r *Reader) Close() error { return r.f.Close() }
