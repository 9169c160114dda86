package smart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parsers. Seeds are the project's
// fixtures and, when present, the shared real-disk corpus. Beyond "never
// panics", it checks the promises the metrics rely on: no two attributes
// with one id, ratios and counts never invented from nothing, and a report
// that always marshals.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	corpus := os.Getenv("DISKCANARY_SMART_CORPUS")
	if corpus == "" {
		corpus = filepath.Join("..", "..", "..", "shared", "fixtures", "smartctl")
	}
	more, _ := filepath.Glob(filepath.Join(corpus, "*.json"))
	for _, p := range append(seeds, more...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"smartctl":{"exit_status":3},"device":{"protocol":"ATA"},"ata_smart_attributes":{"table":[{"id":5},{"id":5},{"id":"x"},{"id":1e400}]}}`))
	f.Add([]byte(`{"smartctl":{},"device":{"protocol":"NVMe"},"nvme_smart_health_information_log":{"critical_warning":-1,"percentage_used":1e30}}`))
	f.Add([]byte(`{"smartctl":{},"device":{"protocol":"ATA"},"temperature":{"current":-1e400},"ata_smart_attributes":{"table":[{"id":5,"value":1e400,"raw":{"value":1e30,"string":"x"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseScan(data)
		r, err := Parse(data)
		if err != nil {
			if r != nil {
				t.Fatal("a result with an error")
			}
			return
		}
		seen := map[int]bool{}
		for _, a := range r.Attributes {
			if seen[a.ID] {
				t.Fatalf("attribute %d twice", a.ID)
			}
			if a.ID < 1 || a.ID > 255 {
				t.Fatalf("attribute id %d out of range", a.ID)
			}
			seen[a.ID] = true
		}
		if r.Protocol != ProtocolATA && len(r.Attributes) > 0 {
			t.Fatalf("attributes for protocol %q", r.Protocol)
		}
		if cw := r.Health.CriticalWarning; cw != nil && (*cw < 0 || *cw > 255) {
			t.Fatalf("critical warning %d is not a byte", *cw)
		}
		if r.ExitStatus < -1 || r.ExitStatus > 255 {
			t.Fatalf("exit status %d", r.ExitStatus)
		}
		st := StateFromResult(r)
		rep := NewReport(&st)
		// encoding/json refuses NaN and ±Inf; the parser must never produce them.
		if _, err := json.Marshal(rep); err != nil {
			t.Fatalf("report does not marshal: %v", err)
		}
		_ = rep.Signals()
	})
}
