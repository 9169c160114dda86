package read

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// IostatReport is one report of `iostat -dx` (sysstat's, or diskcanary
// iostat's, which prints the same columns): a value per column per device.
type IostatReport struct {
	Columns []string             // after "Device": r/s, rkB/s, ...
	Devices map[string][]float64 // in Columns' order
}

// ParseIostat reads every report of an iostat -dx run, in order.
func ParseIostat(r io.Reader) ([]IostatReport, error) {
	var reports []IostatReport
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "Device" || f[0] == "Device:" {
			reports = append(reports, IostatReport{Columns: f[1:], Devices: map[string][]float64{}})
			continue
		}
		if len(reports) == 0 {
			continue // the banner: "Linux 6.18 (host) ..."
		}
		cur := &reports[len(reports)-1]
		if len(f) != len(cur.Columns)+1 {
			return nil, fmt.Errorf("iostat: %d values for %d columns: %q", len(f)-1, len(cur.Columns), sc.Text())
		}
		vals := make([]float64, len(f)-1)
		for i, s := range f[1:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("iostat: column %s: %w", cur.Columns[i], err)
			}
			vals[i] = v
		}
		cur.Devices[f[0]] = vals
	}
	return reports, sc.Err()
}
