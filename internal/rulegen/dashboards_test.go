package rulegen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDashboardsAreWellFormed checks what Grafana would only show at import
// or on screen: unique stable UIDs and panel IDs, panels inside the 24-column
// grid without overlaps, every query on the templated data source, and every
// $variable a query uses defined in the dashboard.
func TestDashboardsAreWellFormed(t *testing.T) {
	uids := map[string]string{}
	wantUIDs := map[string]string{"diskcanary-fleet.json": "diskcanary-fleet", "diskcanary-node.json": "diskcanary-node", "diskcanary-etcd.json": "diskcanary-etcd"}
	for file, d := range Dashboards(Defaults()) {
		if d.UID != wantUIDs[file] {
			t.Errorf("%s: uid %q, want %q (UIDs are stable: links and provisioning depend on them)", file, d.UID, wantUIDs[file])
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %s", file, other, d.UID)
		}
		uids[d.UID] = file
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		if !vars["datasource"] {
			t.Errorf("%s: no datasource variable", file)
		}
		ids := map[int]bool{}
		type cell struct{ x, y int }
		used := map[cell]string{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: duplicate panel id %d", file, p.ID)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.X < 0 || g.W <= 0 || g.X+g.W > 24 || g.H <= 0 {
				t.Errorf("%s: panel %q outside the grid: %+v", file, p.Title, g)
			}
			for x := g.X; x < g.X+g.W; x++ {
				for y := g.Y; y < g.Y+g.H; y++ {
					if other, ok := used[cell{x, y}]; ok {
						t.Errorf("%s: panels %q and %q overlap at %d,%d", file, other, p.Title, x, y)
					}
					used[cell{x, y}] = p.Title
				}
			}
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("%s: panel %q: no query on ${datasource}", file, p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s: panel %q %s not on ${datasource}", file, p.Title, tg.RefID)
				}
				for _, m := range grafanaVar.FindAllStringSubmatch(tg.Expr, -1) {
					if !strings.HasPrefix(m[1], "__") && !vars[m[1]] {
						t.Errorf("%s: panel %q uses undefined variable $%s", file, p.Title, m[1])
					}
				}
			}
		}
		for _, v := range d.Templating.List {
			for _, m := range grafanaVar.FindAllStringSubmatch(v.Definition, -1) {
				if !vars[m[1]] {
					t.Errorf("%s: variable %s uses undefined $%s", file, v.Name, m[1])
				}
			}
		}
		// The committed JSON is valid and has the top-level keys Grafana's
		// importer needs.
		data, err := os.ReadFile(filepath.Join(repoRoot(t), "dashboards", file))
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, k := range []string{"uid", "title", "panels", "templating", "schemaVersion", "time"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("%s: no %q", file, k)
			}
		}
	}
}
