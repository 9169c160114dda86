package read

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Hey is hey's text summary.
type Hey struct {
	RequestsPerSec float64
	// Statuses counts responses by HTTP status.
	Statuses map[int]int
	// Errors counts transport errors by message.
	Errors map[string]int
	// Latency by percent (10, 25, 50, 75, 90, 95, 99). hey leaves out a
	// percentile its sample is too small for (it prints "0% in 0.0000").
	Latency map[int]time.Duration
}

var (
	heyRate    = regexp.MustCompile(`^\s+Requests/sec:\s+([\d.]+)`)
	heyLatency = regexp.MustCompile(`^\s+(\d+)% in ([\d.]+) secs`)
	heyStatus  = regexp.MustCompile(`^\s+\[(\d+)\]\s+(\d+) responses`)
	heyError   = regexp.MustCompile(`^\s+\[(\d+)\]\s+(.*)`)
)

// ParseHey reads hey's default (summary) output: sections under headings
// at the left margin ("Summary:", "Latency distribution:", "Status code
// distribution:", "Error distribution:"), their lines indented.
func ParseHey(r io.Reader) (Hey, error) {
	h := Hey{Statuses: map[int]int{}, Errors: map[string]int{}, Latency: map[int]time.Duration{}}
	section, sawRate := "", false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line != "" && line[0] != ' ' && line[0] != '\t' {
			section = strings.TrimSpace(line)
			continue
		}
		switch section {
		case "Summary:":
			if m := heyRate.FindStringSubmatch(line); m != nil {
				h.RequestsPerSec, _ = strconv.ParseFloat(m[1], 64)
				sawRate = true
			}
		case "Latency distribution:":
			if m := heyLatency.FindStringSubmatch(line); m != nil && m[1] != "0" {
				pct, _ := strconv.Atoi(m[1])
				s, _ := strconv.ParseFloat(m[2], 64)
				h.Latency[pct] = time.Duration(s * 1e9)
			}
		case "Status code distribution:":
			if m := heyStatus.FindStringSubmatch(line); m != nil {
				code, _ := strconv.Atoi(m[1])
				n, _ := strconv.Atoi(m[2])
				h.Statuses[code] += n
			}
		case "Error distribution:":
			if m := heyError.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				h.Errors[m[2]] += n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Hey{}, err
	}
	if !sawRate {
		return Hey{}, fmt.Errorf("hey output: no Requests/sec line")
	}
	return h, nil
}
