package read

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// GoBench is one result line of `go test -bench`: the benchmark's name
// (with its -GOMAXPROCS suffix), its iterations and every value it
// reported by unit ("ns/op", "B/op", or a b.ReportMetric unit such as
// "ns/op-overhead").
type GoBench struct {
	Name   string
	N      int
	Values map[string]float64
}

// ParseGoBench reads the result lines of a `go test -bench` run, in
// order; the other lines (goos, pkg, PASS) are not results.
func ParseGoBench(r io.Reader) ([]GoBench, error) {
	var out []GoBench
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue // a benchmark's own log line
		}
		b := GoBench{Name: f[0], N: n, Values: map[string]float64{}}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("go test -bench: %s: value %q: %w", f[0], f[i], err)
			}
			b.Values[f[i+1]] = v
		}
		out = append(out, b)
	}
	return out, sc.Err()
}
