package read

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseNanoseconds reads one duration in nanoseconds per line, as the
// benches' bpftrace scripts print each traced syscall's, sorted for
// probes.Percentile.
func ParseNanoseconds(r io.Reader) ([]time.Duration, error) {
	var out []time.Duration
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("nanoseconds: %q: %w", line, err)
		}
		out = append(out, time.Duration(n))
	}
	slices.Sort(out)
	return out, sc.Err()
}

// Span is one traced op: its start and end in the kernel's monotonic
// nanoseconds.
type Span struct{ Start, End int64 }

// ParseSpans reads "tid start end" a line, as the capacity bench's
// bpftrace script prints each of fio's appends, in the order printed. One
// fio job makes its appends from one thread; spans from two are an error
// (two jobs, or another process named fio, in one trace).
func ParseSpans(r io.Reader) ([]Span, error) {
	var out []Span
	tid := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("span: %q: want tid, start, end", sc.Text())
		}
		if tid != "" && f[0] != tid {
			return nil, fmt.Errorf("span: %q: from thread %s after %s", sc.Text(), f[0], tid)
		}
		tid = f[0]
		start, err1 := strconv.ParseInt(f[1], 10, 64)
		end, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || end < start {
			return nil, fmt.Errorf("span: %q: want a start and an end after it, in nanoseconds", sc.Text())
		}
		out = append(out, Span{start, end})
	}
	return out, sc.Err()
}
