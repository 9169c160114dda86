package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/tools/rulegen"
)

var (
	baseDir  = filepath.Join(repoRoot, "deploy/kubernetes/base")
	smartDir = filepath.Join(repoRoot, "deploy/kubernetes/smart")
)

// decodeStrict decodes one YAML object the way the API server's strict
// field validation does: unknown, duplicate or wrongly-cased fields fail.
func decodeStrict(data []byte, into any) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, into, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// Minimal Prometheus Operator CRD types: the fields these manifests use,
// named as in monitoring.coreos.com/v1. Anything else is an error.
type (
	relabelConfig struct {
		SourceLabels []string `json:"sourceLabels,omitempty"`
		TargetLabel  string   `json:"targetLabel,omitempty"`
		Regex        string   `json:"regex,omitempty"`
		Action       string   `json:"action,omitempty"`
	}
	scrapeEndpoint struct {
		Port          string          `json:"port"`
		Path          string          `json:"path,omitempty"`
		Interval      string          `json:"interval,omitempty"`
		ScrapeTimeout string          `json:"scrapeTimeout,omitempty"`
		Relabelings   []relabelConfig `json:"relabelings,omitempty"`
		// The drops of the series nothing reads (tools/rulegen, scrape.go).
		MetricRelabelings []relabelConfig `json:"metricRelabelings,omitempty"`
	}
	namespaceSelector struct {
		MatchNames []string `json:"matchNames,omitempty"`
	}
	serviceMonitor struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			JobLabel          string               `json:"jobLabel,omitempty"`
			Selector          metav1.LabelSelector `json:"selector"`
			NamespaceSelector namespaceSelector    `json:"namespaceSelector"`
			Endpoints         []scrapeEndpoint     `json:"endpoints"`
		} `json:"spec"`
	}
	podMonitor struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			JobLabel            string               `json:"jobLabel,omitempty"`
			Selector            metav1.LabelSelector `json:"selector"`
			NamespaceSelector   namespaceSelector    `json:"namespaceSelector"`
			PodMetricsEndpoints []scrapeEndpoint     `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	rule struct {
		Record        string            `json:"record,omitempty"`
		Alert         string            `json:"alert,omitempty"`
		Expr          string            `json:"expr"`
		For           string            `json:"for,omitempty"`
		KeepFiringFor string            `json:"keep_firing_for,omitempty"`
		Labels        map[string]string `json:"labels,omitempty"`
		Annotations   map[string]string `json:"annotations,omitempty"`
	}
	ruleGroup struct {
		Name                    string            `json:"name"`
		Interval                string            `json:"interval,omitempty"`
		QueryOffset             string            `json:"query_offset,omitempty"`
		Limit                   *int              `json:"limit,omitempty"`
		Labels                  map[string]string `json:"labels,omitempty"`
		PartialResponseStrategy string            `json:"partial_response_strategy,omitempty"`
		Rules                   []rule            `json:"rules"`
	}
	prometheusRule struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            struct {
			Groups []ruleGroup `json:"groups"`
		} `json:"spec"`
	}
	kustomization struct {
		metav1.TypeMeta `json:",inline"`
		Resources       []string `json:"resources,omitempty"`
		Patches         []struct {
			Path string `json:"path"`
		} `json:"patches,omitempty"`
	}
)

// manifests is one decoded set of objects.
type manifests struct {
	namespace      *corev1.Namespace
	serviceAccount *corev1.ServiceAccount
	daemonSet      *appsv1.DaemonSet
	service        *corev1.Service
	serviceMonitor *serviceMonitor
	podMonitor     *podMonitor
	rule           *prometheusRule
	configMap      *corev1.ConfigMap
}

// decodeObject decodes one object into the type its apiVersion and kind name.
func (m *manifests) decodeObject(data []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return err
	}
	var into any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		m.namespace = &corev1.Namespace{}
		into = m.namespace
	case "v1 ServiceAccount":
		m.serviceAccount = &corev1.ServiceAccount{}
		into = m.serviceAccount
	case "apps/v1 DaemonSet":
		m.daemonSet = &appsv1.DaemonSet{}
		into = m.daemonSet
	case "v1 Service":
		m.service = &corev1.Service{}
		into = m.service
	case "monitoring.coreos.com/v1 ServiceMonitor":
		m.serviceMonitor = &serviceMonitor{}
		into = m.serviceMonitor
	case "monitoring.coreos.com/v1 PodMonitor":
		m.podMonitor = &podMonitor{}
		into = m.podMonitor
	case "monitoring.coreos.com/v1 PrometheusRule":
		m.rule = &prometheusRule{}
		into = m.rule
	case "v1 ConfigMap":
		m.configMap = &corev1.ConfigMap{}
		into = m.configMap
	default:
		return fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
	}
	return decodeStrict(data, into)
}

// loadBase decodes every YAML file in the base directory, one object each.
func loadBase(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(baseDir, "*.yaml"))
	require.NoError(t, err)
	var m manifests
	var k kustomization
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if filepath.Base(f) == "kustomization.yaml" {
			require.NoError(t, decodeStrict(data, &k), f)
			continue
		}
		require.NotContains(t, string(data), "\n---", "%s: one object per file", f)
		require.NoError(t, m.decodeObject(data), f)
	}
	// Every object is in the kustomization except the PodMonitor, the
	// alternative to the ServiceMonitor (both would scrape twice).
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && b != "podmonitor.yaml" {
			want = append(want, b)
		}
	}
	require.ElementsMatch(t, want, k.Resources)
	for _, o := range []any{m.namespace, m.serviceAccount, m.daemonSet, m.service, m.serviceMonitor, m.podMonitor, m.rule} {
		require.NotNil(t, o, "every kind is present")
	}
	return m
}

func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	loadBase(t)

	// The decoder is strict: a typo, a misplaced field or a duplicate fails.
	ds, err := os.ReadFile(filepath.Join(baseDir, "daemonset.yaml"))
	require.NoError(t, err)
	for name, edit := range map[string][2]string{
		"unknown field":   {"hostNetwork: true", "hostNetwork: true\n      hostNetworking: true"},
		"wrong case":      {"hostNetwork: true", "HostNetwork: true"},
		"misplaced field": {"          args:\n", "          readOnlyRootFilesystem: true\n          args:\n"},
		"duplicate field": {"hostNetwork: true", "hostNetwork: true\n      hostNetwork: true"},
		"wrong type":      {"containerPort: 9742", "containerPort: metrics"},
	} {
		bad := strings.Replace(string(ds), edit[0], edit[1], 1)
		require.NotEqual(t, string(ds), bad, name)
		var m manifests
		require.Error(t, m.decodeObject([]byte(bad)), name)
	}
	var sm serviceMonitor
	require.Error(t, decodeStrict([]byte("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nspec:\n  endpoints:\n    - port: metrics\n      scheme: https\n"), &sm),
		"fields outside the minimal CRD types are refused, not ignored")
}

func container(t *testing.T, ds *appsv1.DaemonSet, name string) *corev1.Container {
	t.Helper()
	for i := range ds.Spec.Template.Spec.Containers {
		if c := &ds.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func flagValue(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

// hostPathAt returns the hostPath volume mounted at path in c, and the mount.
func hostPathAt(t *testing.T, ds *appsv1.DaemonSet, c *corev1.Container, path string) (*corev1.HostPathVolumeSource, corev1.VolumeMount) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != path {
			continue
		}
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name {
				require.NotNil(t, v.HostPath, "volume %s is a hostPath", v.Name)
				return v.HostPath, vm
			}
		}
	}
	t.Fatalf("nothing mounted at %s", path)
	return nil, corev1.VolumeMount{}
}

func TestDaemonSet(t *testing.T) {
	m := loadBase(t)
	ds := m.daemonSet
	pod := ds.Spec.Template.Spec
	require.Equal(t, ds.Spec.Selector.MatchLabels, subset(ds.Spec.Template.Labels, ds.Spec.Selector.MatchLabels), "selector matches the pods")
	require.Equal(t, m.namespace.Name, ds.Namespace)
	require.Equal(t, m.serviceAccount.Name, pod.ServiceAccountName)
	require.False(t, *pod.AutomountServiceAccountToken)

	// Every node, whatever its taints.
	require.Contains(t, pod.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	require.Empty(t, pod.NodeSelector)
	require.Nil(t, pod.Affinity)

	c := container(t, ds, "diskcanary")
	require.Equal(t, []string{"serve"}, c.Args[:1])
	require.Empty(t, c.Command, "the image's ENTRYPOINT runs")

	// Listens on the node's IP only, on the host network.
	require.True(t, pod.HostNetwork)
	require.Equal(t, corev1.DNSClusterFirstWithHostNet, pod.DNSPolicy)
	listen, ok := flagValue(c.Args, "--web.listen-address")
	require.True(t, ok)
	require.Equal(t, "$(HOST_IP):"+metricsPort, listen)
	require.Contains(t, c.Env, corev1.EnvVar{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}})
	require.Len(t, c.Ports, 1)
	require.Equal(t, corev1.ContainerPort{Name: "metrics", ContainerPort: 9742, HostPort: 9742, Protocol: corev1.ProtocolTCP}, c.Ports[0])

	// The host's /proc and /sys, read-only, where --path.* point.
	for flag, host := range map[string]string{"--path.procfs": "/proc", "--path.sysfs": "/sys"} {
		p, ok := flagValue(c.Args, flag)
		require.True(t, ok, flag)
		hp, vm := hostPathAt(t, ds, c, p)
		require.Equal(t, host, hp.Path, flag)
		require.True(t, vm.ReadOnly, "%s is mounted read-only", host)
	}
	// The probe directory: a writable hostPath, the only writable mount.
	dir, ok := flagValue(c.Args, "--probe.dir")
	require.True(t, ok)
	hp, vm := hostPathAt(t, ds, c, dir)
	require.False(t, vm.ReadOnly)
	require.Equal(t, corev1.HostPathDirectoryOrCreate, *hp.Type)
	for _, other := range c.VolumeMounts {
		require.True(t, other.ReadOnly || other.MountPath == dir, "%s is writable", other.MountPath)
	}
	// …handed to the daemon's uid by an init container that can only chown.
	require.Len(t, pod.InitContainers, 1)
	ic := pod.InitContainers[0]
	require.Equal(t, []string{"chown", "65532:65532", dir}, ic.Command)
	require.Equal(t, []corev1.Capability{"CHOWN"}, ic.SecurityContext.Capabilities.Add)
	require.Equal(t, []corev1.Capability{"ALL"}, ic.SecurityContext.Capabilities.Drop)
	require.False(t, *ic.SecurityContext.AllowPrivilegeEscalation)
	require.Equal(t, c.Image, ic.Image)

	// Unprivileged: non-root, no capabilities, read-only root, no SMART.
	psc, sc := pod.SecurityContext, c.SecurityContext
	require.True(t, *psc.RunAsNonRoot)
	require.EqualValues(t, 65532, *psc.RunAsUser, "the image's USER")
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
	require.False(t, *sc.Privileged)
	require.False(t, *sc.AllowPrivilegeEscalation)
	require.True(t, *sc.ReadOnlyRootFilesystem)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	require.Empty(t, sc.Capabilities.Add)
	require.Nil(t, sc.RunAsUser, "the pod's non-root uid applies")
	require.Contains(t, c.Args, "--no-collector.smart", "SMART would only fail without privileges")
	require.Contains(t, c.Args, "--no-collector.blocklatency", "eBPF would only fail without privileges")

	// Requests and a memory limit; no CPU limit (throttling is measured as latency).
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q := c.Resources.Requests[r]
		require.False(t, q.IsZero(), "request %s", r)
	}
	require.True(t, c.Resources.Limits.Memory().Cmp(resource.MustParse("128Mi")) >= 0)
	_, cpuLimit := c.Resources.Limits[corev1.ResourceCPU]
	require.False(t, cpuLimit)
	require.NotNil(t, c.LivenessProbe.TCPSocket)
	require.NotNil(t, c.ReadinessProbe.TCPSocket)
}

// subset returns the entries of have whose keys are in want.
func subset(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k := range want {
		if v, ok := have[k]; ok {
			out[k] = v
		}
	}
	return out
}

// The Service, ServiceMonitor and PodMonitor select what the DaemonSet runs.
func TestScrapeObjectsSelectTheDaemonSet(t *testing.T) {
	m := loadBase(t)
	podLabels := m.daemonSet.Spec.Template.Labels
	c := container(t, m.daemonSet, "diskcanary")
	ns := m.namespace.Name

	svc := m.service
	require.Equal(t, ns, svc.Namespace)
	require.Equal(t, svc.Spec.Selector, subset(podLabels, svc.Spec.Selector))
	require.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	require.Len(t, svc.Spec.Ports, 1)
	require.Equal(t, c.Ports[0].Name, svc.Spec.Ports[0].TargetPort.String())

	sm := m.serviceMonitor.Spec
	require.Equal(t, sm.Selector.MatchLabels, subset(svc.Labels, sm.Selector.MatchLabels))
	require.NotEmpty(t, sm.Selector.MatchLabels)
	require.Equal(t, []string{ns}, sm.NamespaceSelector.MatchNames)
	require.Len(t, sm.Endpoints, 1)
	require.Equal(t, svc.Spec.Ports[0].Name, sm.Endpoints[0].Port)

	pm := m.podMonitor.Spec
	require.Equal(t, pm.Selector.MatchLabels, subset(podLabels, pm.Selector.MatchLabels))
	require.NotEmpty(t, pm.Selector.MatchLabels)
	require.Equal(t, []string{ns}, pm.NamespaceSelector.MatchNames)
	require.Len(t, pm.PodMetricsEndpoints, 1)
	require.Equal(t, c.Ports[0].Name, pm.PodMetricsEndpoints[0].Port)
	for _, e := range []scrapeEndpoint{sm.Endpoints[0], pm.PodMetricsEndpoints[0]} {
		require.Equal(t, "/metrics", e.Path)
		require.Contains(t, e.Relabelings, relabelConfig{SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "node", Action: "replace"})
	}
	// The job label both produce is the one the alert rules select (up{job="diskcanary"}).
	require.Equal(t, "diskcanary", svc.Labels[sm.JobLabel])
	require.Equal(t, "diskcanary", podLabels[pm.JobLabel])
	if rules, err := os.ReadFile(filepath.Join(repoRoot, rulegen.RulesPath)); err == nil {
		require.Contains(t, string(rules), `job="diskcanary"`)
	}
	for _, meta := range []metav1.ObjectMeta{m.serviceAccount.ObjectMeta, m.daemonSet.ObjectMeta, m.serviceMonitor.Metadata, m.podMonitor.Metadata, m.rule.Metadata} {
		require.Equal(t, ns, meta.Namespace, meta.Name)
	}
	require.Equal(t, "privileged", m.namespace.Labels["pod-security.kubernetes.io/enforce"],
		"hostNetwork and hostPath need the privileged Pod Security level")
}

// TestPrometheusRuleMatchesAlerts: the PrometheusRule is alerts/ verbatim.
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, rulegen.RulesPath))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(repoRoot, rulegen.PrometheusRulePath))
	require.NoError(t, err)

	files, err := rulegen.Files(rulegen.Defaults())
	require.NoError(t, err)
	require.Equal(t, string(files[rulegen.PrometheusRulePath]), string(got), "%s is stale: run %s", rulegen.PrometheusRulePath, rulegen.Command)

	// Independently of the generator: spec.groups equals the rule file's
	// groups, value for value, and decodes strictly as the CRD's groups.
	var fromRules struct {
		Groups any `json:"groups"`
	}
	require.NoError(t, decodeStrict(src, &fromRules))
	var fromCRD struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        any `json:"metadata"`
		Spec            struct {
			Groups any `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, decodeStrict(got, &fromCRD))
	require.NotEmpty(t, fromRules.Groups)
	require.Equal(t, fromRules.Groups, fromCRD.Spec.Groups)
	var pr prometheusRule
	require.NoError(t, decodeStrict(got, &pr), "rule fields the Prometheus Operator does not know")
	alerts := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			require.True(t, (r.Alert == "") != (r.Record == ""), "%s: a rule is an alert or a recording rule", g.Name)
			if r.Alert != "" {
				alerts++
			}
		}
	}
	require.Positive(t, alerts)

	// And the comparison can fail.
	changed := bytes.Replace(src, []byte("histogram_quantile(0.99"), []byte("histogram_quantile(0.9"), 1)
	require.NotEqual(t, src, changed)
	var fromChanged struct {
		Groups any `json:"groups"`
	}
	require.NoError(t, decodeStrict(changed, &fromChanged))
	require.NotEqual(t, fromChanged.Groups, fromCRD.Spec.Groups)
}

// kustomize renders base and the SMART overlay (kubectl's built-in
// kustomize), when kubectl is installed.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: cannot render the kustomizations")
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, ee.Stderr)
	}
	require.NoError(t, err)
	return out
}

func decodeAll(t *testing.T, stream []byte) manifests {
	t.Helper()
	var m manifests
	for _, doc := range strings.Split(string(stream), "\n---\n") {
		require.NoError(t, m.decodeObject([]byte(doc)))
	}
	return m
}

// TestSmartOverlay renders deploy/kubernetes/smart and checks that it adds
// exactly SMART's, the eBPF collector's and the kernel log's privileges to the base DaemonSet
// and changes nothing else.
func TestSmartOverlay(t *testing.T) {
	base := decodeAll(t, kustomize(t, baseDir))
	require.NotNil(t, base.rule)
	require.Nil(t, base.podMonitor)
	smart := decodeAll(t, kustomize(t, smartDir))
	require.Equal(t, base.service, smart.service)
	require.Equal(t, base.rule, smart.rule)
	checkSmartDaemonSet(t, base.daemonSet, smart.daemonSet)
}

// checkSmartDaemonSet checks that ds is base with exactly SMART's, the
// eBPF collector's and the kernel log's privileges added.
func checkSmartDaemonSet(t *testing.T, base, ds *appsv1.DaemonSet) {
	t.Helper()
	pod := &ds.Spec.Template.Spec
	c := container(t, ds, "diskcanary")
	require.Contains(t, c.Args, "--collector.smart")
	require.NotContains(t, c.Args, "--no-collector.smart")
	require.Contains(t, c.Args, "--collector.blocklatency")
	require.NotContains(t, c.Args, "--no-collector.blocklatency")
	// Root, because Kubernetes gives a non-root process no ambient
	// capabilities: smartctl, a child process, would run without them.
	require.EqualValues(t, 0, *pod.SecurityContext.RunAsUser)
	require.False(t, *pod.SecurityContext.RunAsNonRoot)
	// Privileged, because only that opens the device cgroup to block devices.
	require.True(t, *c.SecurityContext.Privileged)
	require.True(t, *c.SecurityContext.AllowPrivilegeEscalation, "the API server refuses privileged without it")
	// smartctl's two, the eBPF collector's two and the kernel log's one
	// (which privileged implies; listed so the grant names its users).
	require.ElementsMatch(t, []corev1.Capability{"SYS_RAWIO", "SYS_ADMIN", "BPF", "PERFMON", "SYSLOG"}, c.SecurityContext.Capabilities.Add)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	hp, vm := hostPathAt(t, ds, c, "/dev")
	require.Equal(t, "/dev", hp.Path)
	require.True(t, vm.ReadOnly)

	// Undo exactly those changes: what is left must be the base.
	undone := ds.DeepCopy()
	up := &undone.Spec.Template.Spec
	up.SecurityContext = base.Spec.Template.Spec.SecurityContext
	uc := &up.Containers[slices.IndexFunc(up.Containers, func(c corev1.Container) bool { return c.Name == "diskcanary" })]
	uc.SecurityContext = container(t, base, "diskcanary").SecurityContext
	uc.Args[slices.Index(uc.Args, "--collector.smart")] = "--no-collector.smart"
	uc.Args[slices.Index(uc.Args, "--collector.blocklatency")] = "--no-collector.blocklatency"
	uc.VolumeMounts = slices.DeleteFunc(uc.VolumeMounts, func(v corev1.VolumeMount) bool { return v.MountPath == "/dev" })
	up.Volumes = slices.DeleteFunc(up.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
	require.Equal(t, base, undone)
}

// TestDaemonSetArgsAreAccepted runs the real binary with the DaemonSet's
// arguments (host paths swapped for this machine's) under --config.check, for
// both modes: a renamed flag or a refused probe directory fails here, not
// on a thousand nodes.
func TestDaemonSetArgsAreAccepted(t *testing.T) {
	bin := testkit.Binary(t)
	m := loadBase(t)
	check := func(ds *appsv1.DaemonSet) {
		require.Contains(t, checkDaemonSetArgs(t, bin, ds), "config OK: 2 probe(s)")
	}
	check(m.daemonSet)

	var smart appsv1.DaemonSet
	data, err := os.ReadFile(filepath.Join(smartDir, "daemonset-smart.yaml"))
	require.NoError(t, err)
	require.NoError(t, decodeStrict(data, &smart), "the SMART patch is a partial DaemonSet")
	patched := m.daemonSet.DeepCopy()
	container(t, patched, "diskcanary").Args = container(t, &smart, "diskcanary").Args
	check(patched)
}

// checkDaemonSetArgs runs bin with the arguments of ds's diskcanary
// container under --config.check, host paths swapped for this machine's:
// /proc and /sys for the mounted host ones, each probe directory for a new
// temporary directory, the node's IP for 127.0.0.1. It returns the output.
func checkDaemonSetArgs(t *testing.T, bin string, ds *appsv1.DaemonSet) string {
	t.Helper()
	c := container(t, ds, "diskcanary")
	local := map[string]string{}
	for _, flag := range []string{"--path.procfs", "--path.sysfs"} {
		p, ok := flagValue(c.Args, flag)
		require.True(t, ok, flag)
		hp, _ := hostPathAt(t, ds, c, p)
		local[flag+"="+p] = flag + "=" + hp.Path
	}
	probeDirs := 0
	for _, a := range c.Args {
		if dir, ok := strings.CutPrefix(a, "--probe.dir="); ok {
			hostPathAt(t, ds, c, dir) // mounted from the host
			local[a] = "--probe.dir=" + filepath.Join(t.TempDir(), "probe")
			probeDirs++
		}
	}
	require.Positive(t, probeDirs, "no --probe.dir")
	args := []string{}
	for _, a := range c.Args {
		if to, ok := local[a]; ok {
			a = to
		}
		args = append(args, strings.ReplaceAll(a, "$(HOST_IP)", "127.0.0.1"))
	}
	out, err := exec.Command(bin, append(args, "--config.check")...).CombinedOutput()
	require.NoError(t, err, "%s %v\n%s", bin, args, out)
	return string(out)
}
