package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The runbooks' per-install-mode commands name the manifests' namespace,
// pod label and probe mount, and read /metrics the way the DaemonSet
// listens: through the API server's pod proxy, never localhost (the pod
// listens on the node's IP only).
func TestRunbookCommandsMatchTheManifests(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "runbooks.md"))
	require.NoError(t, err)
	doc := string(data)
	m := loadBase(t)
	ds := m.daemonSet

	ns := regexp.MustCompile(`(?m)^NS=(\S+) `).FindStringSubmatch(doc)
	require.NotNil(t, ns, "the Kubernetes block sets NS")
	require.Equal(t, m.namespace.Name, ns[1])

	sel := regexp.MustCompile(`get pods -l (\S+)=(\S+) `).FindStringSubmatch(doc)
	require.NotNil(t, sel, "the Kubernetes block selects the pods by label")
	require.Equal(t, ds.Spec.Selector.MatchLabels[sel[1]], sel[2], "the runbook's label selects the DaemonSet's pods")

	c := container(t, ds, "diskcanary")
	listen, ok := flagValue(c.Args, "--web.listen-address")
	require.True(t, ok)
	port := listen[strings.LastIndex(listen, ":")+1:]
	require.Contains(t, doc, `dc_metrics() { kubectl get --raw "/api/v1/namespaces/$NS/pods/$POD:`+port+`/proxy/metrics"; }`)

	probeDir, ok := flagValue(c.Args, "--probe.dir")
	require.True(t, ok)
	require.Contains(t, doc, "mounted at `"+probeDir+"`")

	// Outside the block that defines them, no step reads localhost.
	defs := strings.Index(doc, "dc_metrics() {")
	rest := doc[strings.Index(doc[defs:], "```")+defs:]
	if i := strings.Index(rest, "localhost:"); i >= 0 {
		line := rest[strings.LastIndex(rest[:i], "\n")+1:]
		t.Errorf("a step reads localhost, which fails under the DaemonSet: %q", line[:strings.IndexByte(line+"\n", '\n')])
	}
}
