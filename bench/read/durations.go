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
