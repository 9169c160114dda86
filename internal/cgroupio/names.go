package cgroupio

import (
	"strings"
)

// Workload is the name people use for the cgroup at path, in this order:
//   - a Kubernetes pod's cgroup, "pod/UID", and a container's in it,
//     "pod/UID/ID12" (the container ID's first 12 characters, as crictl
//     and docker show it), for the cgroupfs driver's kubepods/…/podUID/ID
//     and the systemd driver's kubepods-…-podUID.slice/cri-containerd-ID.scope
//     (docker-, crio-, cri-o- likewise);
//   - a container outside Kubernetes, "docker/ID12", "podman/ID12" or
//     "container/ID12";
//   - the innermost systemd unit on the path (system.slice/foo.service →
//     "foo.service", user.slice/…/user@1000.service/app.slice/x.scope →
//     "x.scope");
//   - otherwise the path itself (the root cgroup is "/").
func Workload(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		return "/"
	}
	for i, s := range segs {
		uid, ok := podUID(s)
		if !ok {
			continue
		}
		name := "pod/" + uid
		if i+1 < len(segs) {
			if _, id := containerID(segs[i+1]); id != "" {
				name += "/" + short(id)
			} else {
				name += "/" + segs[i+1]
			}
		}
		return name
	}
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		// cgroupfs drivers: /docker/ID.
		if i > 0 && isHexID(s) {
			switch segs[i-1] {
			case "docker", "podman":
				return segs[i-1] + "/" + short(s)
			}
		}
		if runtime, id := containerID(s); id != "" {
			return runtime + "/" + short(id)
		}
		if isUnit(s) {
			return s
		}
	}
	return path
}

// podUID finds a pod's UID in a cgroup path segment: "podUID" (cgroupfs
// driver) or "kubepods-QOS-podUID.slice" / "kubepods-podUID.slice"
// (systemd driver, the UID's dashes written as underscores).
func podUID(s string) (string, bool) {
	if strings.HasSuffix(s, ".slice") && strings.HasPrefix(s, "kubepods") {
		i := strings.LastIndex(s, "-pod")
		if i < 0 {
			return "", false
		}
		uid := strings.ReplaceAll(strings.TrimSuffix(s[i+len("-pod"):], ".slice"), "_", "-")
		return uid, isUID(uid)
	}
	if uid, ok := strings.CutPrefix(s, "pod"); ok && isUID(uid) {
		return uid, true
	}
	return "", false
}

// isUID is a Kubernetes UID's shape: 36 characters, hex and dashes.
func isUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for _, c := range s {
		if c != '-' && !isHex(c) {
			return false
		}
	}
	return true
}

// containerRuntimes maps the systemd scope prefix a container runtime gives
// its containers to the name the workload gets outside Kubernetes.
var containerRuntimes = []struct{ prefix, name string }{
	{"cri-containerd-", "container"},
	{"crio-conmon-", "conmon"},
	{"crio-", "container"},
	{"cri-o-", "container"},
	{"docker-", "docker"},
	{"libpod-conmon-", "conmon"},
	{"libpod-", "podman"},
}

// containerID reads a container's scope ("docker-ID.scope") or, with the
// cgroupfs driver, a bare 64-hex ID; runtime is who named it.
func containerID(s string) (runtime, id string) {
	if isHexID(s) {
		return "container", s
	}
	base, ok := strings.CutSuffix(s, ".scope")
	if !ok {
		return "", ""
	}
	for _, r := range containerRuntimes {
		if rest, ok := strings.CutPrefix(base, r.prefix); ok && isHexID(rest) {
			return r.name, rest
		}
	}
	return "", ""
}

func isHexID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !isHex(c) {
			return false
		}
	}
	return true
}

func isHex(c rune) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func short(id string) string { return id[:12] }

// isUnit is a systemd unit name of a kind that holds processes or groups
// them (systemd.unit(5)).
func isUnit(s string) bool {
	for _, suffix := range []string{".service", ".scope", ".slice", ".socket", ".mount", ".swap"} {
		if strings.HasSuffix(s, suffix) && len(s) > len(suffix) {
			return true
		}
	}
	return false
}
