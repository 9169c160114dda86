package rulegen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every alert links to a dashboard that exists, and every variable its
// link sets is one of that dashboard's variables (a renamed variable
// would silently open the dashboard on its defaults).
func TestAlertDashboardLinksResolve(t *testing.T) {
	root := repoRoot(t)
	vars := map[string]map[string]bool{} // uid -> variable names
	files, _ := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID        string `json:"uid"`
			Templating struct {
				List []struct {
					Name string `json:"name"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		vars[d.UID] = map[string]bool{}
		for _, v := range d.Templating.List {
			vars[d.UID][v.Name] = true
		}
	}
	link := regexp.MustCompile(`^` + regexp.QuoteMeta(Defaults().GrafanaURL) + `/d/([\w-]+)\?(.*)$`)
	seen := map[string]int{}
	for _, g := range Rules(Defaults()).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			m := link.FindStringSubmatch(r.Annotations["dashboard_url"])
			if m == nil {
				t.Errorf("%s: dashboard_url %q is not a link to a dashboard", r.Alert, r.Annotations["dashboard_url"])
				continue
			}
			uid := m[1]
			seen[uid]++
			if vars[uid] == nil {
				t.Errorf("%s links to dashboard %q, which is not generated", r.Alert, uid)
				continue
			}
			for _, kv := range strings.Split(m[2], "&") {
				name, _, _ := strings.Cut(strings.TrimPrefix(kv, "var-"), "=")
				if !vars[uid][name] {
					t.Errorf("%s sets variable %q, which dashboard %s does not have", r.Alert, name, uid)
				}
			}
		}
	}
	// Literal expectations: where on-call lands.
	want := map[string]int{dashboardNode: 36, dashboardFleet: 2, dashboardEtcd: 3}
	for uid, n := range want {
		if seen[uid] != n {
			t.Errorf("%d alerts link to %s; want %d", seen[uid], uid, n)
		}
	}
}
