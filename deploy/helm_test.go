package deploy

import (
	"encoding/json"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/tools/rulegen"
)

var chartDir = filepath.Join(repoRoot, "deploy/helm/diskcanary")

// The release the tests install, named as deploy/kubernetes names its
// objects, so that the defaults compare with the kustomize base.
const (
	releaseName      = "diskcanary"
	releaseNamespace = "diskcanary"
)

// renderChart renders the chart as `helm template diskcanary
// deploy/helm/diskcanary -n diskcanary -f VALUES --api-versions
// monitoring.coreos.com/v1` does (a cluster with the Prometheus Operator),
// with Helm's own loader (which validates Chart.yaml), values coalescing,
// values.schema.json validation (unless skipSchema) and template engine.
func renderChart(values string, skipSchema bool) (map[string]string, error) {
	return renderChartOn(values, skipSchema, operatorAPI)
}

// renderChartOn renders as renderChart on a cluster that serves Helm's
// default APIs and apiVersions.
func renderChartOn(values string, skipSchema bool, apiVersions ...string) (map[string]string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.APIVersions = append(caps.APIVersions, apiVersions...)
	top, err := chartutil.ToRenderValuesWithSchemaValidation(chrt, vals,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, IsInstall: true}, caps, skipSchema)
	if err != nil {
		return nil, err
	}
	return engine.Render(chrt, top)
}

var yamlDocSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeChart renders the chart with values and decodes every object
// strictly (decodeStrict: unknown, duplicate or mis-cased fields fail), at
// most one object of each kind.
func decodeChart(t *testing.T, values string) manifests {
	t.Helper()
	return decodeChartOn(t, values, operatorAPI)
}

// decodeChartOn is decodeChart on a cluster serving apiVersions.
func decodeChartOn(t *testing.T, values string, apiVersions ...string) manifests {
	t.Helper()
	out, err := renderChartOn(values, false, apiVersions...)
	require.NoError(t, err)
	var m manifests
	kinds := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if path.Base(name) == "NOTES.txt" {
			continue
		}
		for _, doc := range yamlDocSeparator.Split(out[name], -1) {
			if onlyComments(doc) {
				continue
			}
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal([]byte(doc), &tm), name)
			kind := tm.APIVersion + " " + tm.Kind
			require.NotContains(t, kinds, kind, "%s: a second %s (the first in %s)", name, kind, kinds[kind])
			kinds[kind] = name
			require.NoError(t, m.decodeObject([]byte(doc)), "%s:\n%s", name, doc)
		}
	}
	require.NotNil(t, m.daemonSet)
	require.NotNil(t, m.service)
	return m
}

func onlyComments(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// TestHelmChartLint runs `helm lint`'s rules (Chart.yaml, values and the
// schema, templates rendered and parsed, deprecated APIs) on the chart:
// nothing above INFO.
func TestHelmChartLint(t *testing.T) {
	for _, values := range []map[string]any{nil, {"smart": map[string]any{"enabled": true}}} {
		linter := lint.All(chartDir, values, releaseNamespace, false)
		for _, msg := range linter.Messages {
			t.Log(msg)
		}
		require.LessOrEqual(t, linter.HighestSeverity, support.InfoSev, "helm lint with %v", values)
	}

	chrt, err := loader.Load(chartDir)
	require.NoError(t, err)
	require.Equal(t, "v2", chrt.Metadata.APIVersion)
	require.Equal(t, "diskcanary", chrt.Metadata.Name)
	require.Equal(t, "application", chrt.Metadata.Type)
	// The default image is the release deploy/kubernetes pins.
	base := loadBase(t)
	require.Equal(t, "ghcr.io/diskcanary/diskcanary:"+chrt.Metadata.AppVersion, container(t, base.daemonSet, "diskcanary").Image)
}

// checkChartWiring: the objects select each other, the scrape job is the one
// the rules select, and every object is in namespace ns.
func checkChartWiring(t *testing.T, m manifests, ns string) {
	t.Helper()
	ds := m.daemonSet
	podLabels := ds.Spec.Template.Labels
	require.Equal(t, ns, ds.Namespace)
	require.Equal(t, ds.Spec.Selector.MatchLabels, subset(podLabels, ds.Spec.Selector.MatchLabels), "selector matches the pods")
	require.Len(t, ds.Spec.Selector.MatchLabels, 2, "name and instance, like every chart: two releases never adopt each other's pods")
	if m.serviceAccount != nil {
		require.Equal(t, m.serviceAccount.Name, ds.Spec.Template.Spec.ServiceAccountName)
		require.Equal(t, ns, m.serviceAccount.Namespace)
		require.False(t, *m.serviceAccount.AutomountServiceAccountToken)
	}
	svc := m.service
	require.Equal(t, ns, svc.Namespace)
	require.Equal(t, svc.Spec.Selector, subset(podLabels, svc.Spec.Selector))
	require.Equal(t, ds.Spec.Selector.MatchLabels, svc.Spec.Selector)
	require.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	require.Len(t, svc.Spec.Ports, 1)
	c := container(t, ds, "diskcanary")
	require.Equal(t, c.Ports[0].Name, svc.Spec.Ports[0].TargetPort.String())
	require.Equal(t, c.Ports[0].ContainerPort, svc.Spec.Ports[0].Port)
	if sm := m.serviceMonitor; sm != nil {
		require.Equal(t, sm.Spec.Selector.MatchLabels, subset(svc.Labels, sm.Spec.Selector.MatchLabels))
		require.NotEmpty(t, sm.Spec.Selector.MatchLabels)
		require.Equal(t, []string{ns}, sm.Spec.NamespaceSelector.MatchNames)
		require.Len(t, sm.Spec.Endpoints, 1)
		require.Equal(t, svc.Spec.Ports[0].Name, sm.Spec.Endpoints[0].Port)
		// The job the exporter-down alert selects (up{job="diskcanary"}).
		require.Equal(t, "diskcanary", svc.Labels[sm.Spec.JobLabel])
		require.Contains(t, rulegen.Defaults().JobSelector, `job="diskcanary"`)
	}
}

// TestHelmDefaultsAreTheKustomizeBase: with its defaults (and the release
// named as deploy/kubernetes names its objects) the chart runs exactly the
// pods of deploy/kubernetes/base and scrapes them the same way.
func TestHelmDefaultsAreTheKustomizeBase(t *testing.T) {
	m := decodeChart(t, "")
	base := loadBase(t)
	checkChartWiring(t, m, releaseNamespace)

	require.Equal(t, base.daemonSet.Spec.Template.Spec, m.daemonSet.Spec.Template.Spec)
	require.Equal(t, base.daemonSet.Spec.UpdateStrategy, m.daemonSet.Spec.UpdateStrategy)
	require.Equal(t, base.service.Spec.Ports, m.service.Spec.Ports)
	require.Equal(t, base.serviceMonitor.Spec.JobLabel, m.serviceMonitor.Spec.JobLabel)
	require.Equal(t, base.serviceMonitor.Spec.Endpoints, m.serviceMonitor.Spec.Endpoints)
	require.Equal(t, base.serviceAccount.AutomountServiceAccountToken, m.serviceAccount.AutomountServiceAccountToken)
	require.NotNil(t, m.rule, "prometheusRule.enabled by default")
	require.NotNil(t, m.configMap, "dashboards.enabled by default")

	// Helm's labels on every object; the selector only name and instance.
	require.Equal(t, map[string]string{"app.kubernetes.io/name": "diskcanary", "app.kubernetes.io/instance": releaseName},
		m.daemonSet.Spec.Selector.MatchLabels)
	for _, meta := range []metav1.ObjectMeta{m.daemonSet.ObjectMeta, m.daemonSet.Spec.Template.ObjectMeta, m.service.ObjectMeta,
		m.serviceAccount.ObjectMeta, m.serviceMonitor.Metadata, m.rule.Metadata, m.configMap.ObjectMeta} {
		require.Equal(t, "diskcanary-0.1.0", meta.Labels["helm.sh/chart"], meta.Name)
		require.Equal(t, "Helm", meta.Labels["app.kubernetes.io/managed-by"], meta.Name)
	}
	for _, meta := range []metav1.ObjectMeta{m.daemonSet.ObjectMeta, m.service.ObjectMeta, m.serviceAccount.ObjectMeta,
		m.serviceMonitor.Metadata, m.rule.Metadata, m.configMap.ObjectMeta} {
		require.Equal(t, releaseNamespace, meta.Namespace, meta.Name)
	}
}

// TestHelmRulesAndDashboardsAreTheGenerators: the PrometheusRule and the
// dashboards ConfigMap hold exactly what tools/rulegen generates now
// (not what is committed), so a stale files/ copy fails here too.
func TestHelmRulesAndDashboardsAreTheGenerators(t *testing.T) {
	files, err := rulegen.Files(rulegen.Defaults())
	require.NoError(t, err)
	m := decodeChart(t, "")

	var want struct {
		Groups []ruleGroup `json:"groups"`
	}
	require.NoError(t, decodeStrict(files[rulegen.RulesPath], &want))
	require.NotEmpty(t, want.Groups)
	require.Equal(t, want.Groups, m.rule.Spec.Groups)

	cm := m.configMap
	require.Equal(t, "diskcanary-dashboards", cm.Name)
	require.Equal(t, "1", cm.Labels["grafana_dashboard"], "the Grafana sidecar's default label")
	wantDashboards := map[string]string{}
	for name, b := range files {
		if dir, base := path.Split(name); dir == "dashboards/" {
			wantDashboards[base] = string(b)
		}
	}
	require.Len(t, wantDashboards, 3, "fleet, node and etcd")
	require.Equal(t, wantDashboards, cm.Data)
	for name, d := range cm.Data {
		var dash struct {
			UID string `json:"uid"`
		}
		require.NoError(t, json.Unmarshal([]byte(d), &dash), name)
		require.Equal(t, strings.TrimSuffix(name, ".json"), dash.UID)
	}
}

// TestHelmMonitoringObjectsSwitchOff: each monitoring object has its switch,
// and without them only the exporter is installed.
func TestHelmMonitoringObjectsSwitchOff(t *testing.T) {
	m := decodeChart(t, `
serviceMonitor: {enabled: false}
prometheusRule: {enabled: false}
dashboards: {enabled: false}
serviceAccount: {create: false}
`)
	checkChartWiring(t, m, releaseNamespace)
	require.Nil(t, m.serviceMonitor)
	require.Nil(t, m.rule)
	require.Nil(t, m.configMap)
	require.Nil(t, m.serviceAccount)
	require.Equal(t, "default", m.daemonSet.Spec.Template.Spec.ServiceAccountName)

	m = decodeChart(t, `prometheusRule: {enabled: false}`)
	require.NotNil(t, m.serviceMonitor)
	require.Nil(t, m.rule)
	require.NotNil(t, m.configMap)
}

const customValues = `
fullnameOverride: canary
namespaceOverride: monitoring
image: {registry: registry.example.com, repository: mirror/diskcanary, tag: v0.2.0, pullPolicy: Always}
probeDirs: [/var/lib/etcd/diskcanary, /mnt/data/diskcanary]
extraArgs: [--log.level=debug]
service: {port: 9800}
nodeSelector: {node-role.kubernetes.io/control-plane: ""}
tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 512Mi}}
priorityClassName: system-node-critical
podAnnotations: {example.com/owner: storage}
commonLabels: {team: storage}
serviceMonitor:
  additionalLabels: {release: kube-prometheus-stack}
  interval: 15s
  relabelings:
    - {sourceLabels: [__meta_kubernetes_namespace], targetLabel: kubernetes_namespace, action: replace}
prometheusRule:
  additionalLabels: {release: kube-prometheus-stack}
  additionalRuleLabels: {team: storage, severity: ignored}
dashboards:
  namespace: grafana
  label: grafana_dashboard_diskcanary
  labelValue: "yes"
  annotations: {grafana_folder: diskcanary}
`

// TestHelmCustomValues: each value reaches the object it configures,
// checked against literal expectations.
func TestHelmCustomValues(t *testing.T) {
	m := decodeChart(t, customValues)
	checkChartWiring(t, m, "monitoring")
	ds := m.daemonSet
	pod := ds.Spec.Template.Spec
	require.Equal(t, "canary", ds.Name)
	c := container(t, ds, "diskcanary")
	require.Equal(t, []string{
		"serve",
		"--web.listen-address=$(HOST_IP):9800",
		"--path.procfs=/host/proc",
		"--path.sysfs=/host/sys",
		"--probe.dir=/var/lib/etcd/diskcanary",
		"--probe.dir=/mnt/data/diskcanary",
		"--no-collector.smart",
		"--no-collector.blocklatency",
		"--log.level=debug",
	}, c.Args)
	require.Equal(t, []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9800, HostPort: 9800, Protocol: corev1.ProtocolTCP}}, c.Ports)
	require.EqualValues(t, 9800, m.service.Spec.Ports[0].Port)

	// Each probe directory: the host's directory at the same path, writable,
	// created by kubelet and chowned by the init container.
	for _, dir := range []string{"/var/lib/etcd/diskcanary", "/mnt/data/diskcanary"} {
		hp, vm := hostPathAt(t, ds, c, dir)
		require.Equal(t, dir, hp.Path)
		require.Equal(t, corev1.HostPathDirectoryOrCreate, *hp.Type)
		require.False(t, vm.ReadOnly)
		ic := pod.InitContainers[0]
		_, icMount := hostPathAt(t, ds, &ic, dir)
		require.Equal(t, vm.Name, icMount.Name)
	}
	require.Equal(t, []string{"chown", "65532:65532", "/var/lib/etcd/diskcanary", "/mnt/data/diskcanary"}, pod.InitContainers[0].Command)
	for _, cc := range []corev1.Container{*c, pod.InitContainers[0]} {
		require.Equal(t, "registry.example.com/mirror/diskcanary:v0.2.0", cc.Image)
		require.Equal(t, corev1.PullAlways, cc.ImagePullPolicy)
	}

	require.Equal(t, map[string]string{"node-role.kubernetes.io/control-plane": ""}, pod.NodeSelector)
	require.Equal(t, []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, pod.Tolerations)
	require.Equal(t, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}, c.Resources)
	require.Equal(t, "system-node-critical", pod.PriorityClassName)
	require.Equal(t, map[string]string{"example.com/owner": "storage"}, ds.Spec.Template.Annotations)
	for _, meta := range []metav1.ObjectMeta{ds.ObjectMeta, ds.Spec.Template.ObjectMeta, m.service.ObjectMeta, m.serviceAccount.ObjectMeta,
		m.serviceMonitor.Metadata, m.rule.Metadata, m.configMap.ObjectMeta} {
		require.Equal(t, "storage", meta.Labels["team"], "commonLabels on %s", meta.Name)
	}

	sm := m.serviceMonitor
	require.Equal(t, "kube-prometheus-stack", sm.Metadata.Labels["release"])
	require.Equal(t, "15s", sm.Spec.Endpoints[0].Interval)
	require.Equal(t, "10s", sm.Spec.Endpoints[0].ScrapeTimeout)
	require.Equal(t, []relabelConfig{
		{SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "node", Action: "replace"},
		{SourceLabels: []string{"__meta_kubernetes_namespace"}, TargetLabel: "kubernetes_namespace", Action: "replace"},
	}, sm.Spec.Endpoints[0].Relabelings)

	// Extra labels on every alert, none on recording rules; an alert's own
	// labels (severity) win. Otherwise the generated rules, unchanged.
	require.Equal(t, "kube-prometheus-stack", m.rule.Metadata.Labels["release"])
	files, err := rulegen.Files(rulegen.Defaults())
	require.NoError(t, err)
	var want struct {
		Groups []ruleGroup `json:"groups"`
	}
	require.NoError(t, decodeStrict(files[rulegen.RulesPath], &want))
	alerts := 0
	for gi, g := range m.rule.Spec.Groups {
		for ri, r := range g.Rules {
			orig := want.Groups[gi].Rules[ri]
			if r.Alert == "" {
				require.Equal(t, orig, r)
				continue
			}
			alerts++
			require.Equal(t, "storage", r.Labels["team"], r.Alert)
			require.Equal(t, orig.Labels["severity"], r.Labels["severity"], r.Alert)
			require.NotEqual(t, "ignored", r.Labels["severity"], r.Alert)
			delete(r.Labels, "team")
			require.Equal(t, orig, r)
		}
	}
	require.Positive(t, alerts)
	require.Len(t, m.rule.Spec.Groups, len(want.Groups))

	cm := m.configMap
	require.Equal(t, "canary-dashboards", cm.Name)
	require.Equal(t, "grafana", cm.Namespace)
	require.Equal(t, "yes", cm.Labels["grafana_dashboard_diskcanary"])
	require.NotContains(t, cm.Labels, "grafana_dashboard")
	require.Equal(t, map[string]string{"grafana_folder": "diskcanary"}, cm.Annotations)
	require.Len(t, cm.Data, 3)
}

// TestHelmSmartMode: smart.enabled adds exactly what the SMART overlay of
// deploy/kubernetes adds (checkSmartDaemonSet, shared with TestSmartOverlay),
// with the default probe directory and with others.
func TestHelmSmartMode(t *testing.T) {
	for _, values := range []string{"", `probeDirs: [/var/lib/etcd/diskcanary, /mnt/data/diskcanary]`} {
		base := decodeChart(t, values)
		smart := decodeChart(t, values+"\nsmart: {enabled: true}\n")
		checkSmartDaemonSet(t, base.daemonSet, smart.daemonSet)
		require.Equal(t, base.service, smart.service)
		require.Equal(t, base.rule, smart.rule)
	}
}

// TestHelmValuesAreValidated: values.schema.json refuses misspelt and
// wrongly-typed values, and the templates refuse bad probe directories
// when the schema is skipped (helm --skip-schema-validation).
func TestHelmValuesAreValidated(t *testing.T) {
	for values, want := range map[string]string{
		`serviceMonitor: {enable: true}`:        "enable",
		`smart: {enabled: "yes"}`:               "smart",
		`probeDirs: [var/lib/diskcanary]`:       "probeDirs",
		`probeDirs: []`:                         "probeDirs",
		`probeDirs: [/srv/canary, /srv/canary]`: "probeDirs",
		`service: {port: 0}`:                    "port",
		`serviceMonitor: {interval: 30}`:        "interval",
		`dashboards: {labelValue: 1}`:           "labelValue",
		`probeDir: /srv/canary`:                 "probeDir",
	} {
		_, err := renderChart(values, false)
		require.Error(t, err, values)
		require.Contains(t, err.Error(), want, values)
	}
	for values, want := range map[string]string{
		`probeDirs: [var/lib/diskcanary]`:       `probeDirs: "var/lib/diskcanary" is not an absolute path`,
		`probeDirs: []`:                         "probeDirs: give at least one host directory to probe",
		`probeDirs: [/srv/canary, /srv/canary]`: "probeDirs: a directory is listed twice",
	} {
		_, err := renderChart(values, true)
		require.Error(t, err, values)
		require.Contains(t, err.Error(), want, values)
	}
}

// TestHelmDaemonSetArgsAreAccepted runs the real binary with the rendered
// DaemonSet's arguments under --config.check (checkDaemonSetArgs, shared
// with the kustomize test): defaults, and SMART with two probe directories
// and an extra flag.
func TestHelmDaemonSetArgsAreAccepted(t *testing.T) {
	bin := testkit.Binary(t)
	for values, want := range map[string]string{
		"": "config OK: 2 probe(s)",
		`
smart: {enabled: true}
probeDirs: [/var/lib/etcd/diskcanary, /mnt/data/diskcanary]
extraArgs: [--log.level=debug]
service: {port: 9800}
`: "config OK: 4 probe(s)",
	} {
		m := decodeChart(t, values)
		require.Contains(t, checkDaemonSetArgs(t, bin, m.daemonSet), want, values)
	}
}

// TestHelmRuleLayers: prometheusRule.layer renders the per-cluster or the
// global rule file's groups (deploy/sharded), and the sharded values
// example is the per-cluster layer.
func TestHelmRuleLayers(t *testing.T) {
	files, err := rulegen.Files(rulegen.Defaults())
	require.NoError(t, err)
	example, err := os.ReadFile("sharded/values-cluster.yaml")
	require.NoError(t, err)
	for _, c := range []struct{ values, file string }{
		{string(example), rulegen.ClusterRulesPath},
		{"prometheusRule: {layer: global}", rulegen.GlobalRulesPath},
	} {
		var want struct {
			Groups []ruleGroup `json:"groups"`
		}
		require.NoError(t, decodeStrict(files[c.file], &want))
		require.NotEmpty(t, want.Groups)
		require.Equal(t, want.Groups, decodeChart(t, c.values).rule.Spec.Groups, c.values)
	}
	_, err = renderChart("prometheusRule: {layer: shard}", false)
	require.ErrorContains(t, err, "layer")
}
