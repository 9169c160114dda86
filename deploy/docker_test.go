package deploy

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	goversion "go/version"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// repoRoot is where go test runs this package from, one level down.
const repoRoot = ".."

// The image contract, from docs/contract.md and the Kubernetes manifests.
const (
	imageBinary = "/usr/bin/diskcanary"
	metricsPort = "9742"
)

type dockerfile struct {
	stages   []instructions.Stage
	metaArgs map[string]string
}

// parseDockerfile parses with BuildKit's own parser and linter, the code
// `docker build` runs, and fails on any syntax or lint warning.
func parseDockerfile(t require.TestingT, src []byte) dockerfile {
	res, err := parser.Parse(bytes.NewReader(src))
	require.NoError(t, err)
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile parser warning: %s (line %d)", w.Short, w.Location.Start.Line)
	}
	var lints []string
	lint := linter.New(&linter.Config{ExperimentalAll: true, Warn: func(rule, _, _, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		lints = append(lints, fmt.Sprintf("line %d: %s: %s", line, rule, msg))
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	require.NoError(t, err)
	require.Empty(t, lints, "BuildKit lint rules")
	args := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			args[kv.Key] = kv.ValueString()
		}
	}
	return dockerfile{stages: stages, metaArgs: args}
}

func (d dockerfile) expand(s string) string {
	return os.Expand(s, func(k string) string { return d.metaArgs[k] })
}

func commands[T any](s instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if v, ok := c.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func TestDockerfile(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	checkDockerfile(t, src)
}

func checkDockerfile(t require.TestingT, src []byte) {
	df := parseDockerfile(t, src)

	require.Len(t, df.stages, 2, "a builder stage and a runtime stage")
	build, runtime := df.stages[0], df.stages[1]
	require.Equal(t, "build", build.Name)

	// The builder's Go is at least the go directive of go.mod, so the
	// image never downloads a toolchain at build time.
	base := df.expand(build.BaseName)
	require.Regexp(t, `^golang:1\.\d+\.\d+-[a-z]+$`, base)
	goVer := strings.TrimPrefix(strings.Split(base, "-")[0], "golang:")
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	require.NoError(t, err)
	want := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	require.NotNil(t, want)
	require.GreaterOrEqual(t, goversion.Compare("go"+goVer, "go"+string(want[1])), 0,
		"builder Go %s is older than go.mod's go %s", goVer, want[1])

	// The build runs deploy/build.sh (static, version ldflags) into one path…
	runs := commands[*instructions.RunCommand](build)
	require.NotEmpty(t, runs)
	last := runs[len(runs)-1]
	require.True(t, last.PrependShell)
	fields := strings.Fields(strings.Join(last.CmdLine, " "))
	require.Len(t, fields, 2, "RUN ./deploy/build.sh OUTPUT")
	require.Equal(t, "./deploy/build.sh", fields[0])
	built := fields[1]
	for _, a := range []string{"VERSION", "REVISION", "BRANCH", "BUILD_USER", "BUILD_DATE"} {
		found := false
		for _, arg := range commands[*instructions.ArgCommand](build) {
			for _, kv := range arg.Args {
				found = found || kv.Key == a
			}
		}
		require.True(t, found, "build arg %s is declared, so --build-arg reaches build.sh", a)
	}

	// …and the runtime copies exactly that path to where ENTRYPOINT runs it.
	require.Regexp(t, `^debian:[a-z]+-slim$`, df.expand(runtime.BaseName))
	var copied string
	for _, c := range commands[*instructions.CopyCommand](runtime) {
		if c.From == build.Name {
			require.Equal(t, []string{built}, c.SourcePaths)
			copied = c.DestPath
		}
	}
	require.Equal(t, imageBinary, copied)
	installsSmartctl := false
	for _, r := range commands[*instructions.RunCommand](runtime) {
		line := strings.Join(r.CmdLine, " ")
		installsSmartctl = installsSmartctl || regexp.MustCompile(`apt-get install .*\bsmartmontools\b`).MatchString(line)
	}
	require.True(t, installsSmartctl, "the runtime installs smartmontools (smartctl)")

	entry := commands[*instructions.EntrypointCommand](runtime)
	require.Len(t, entry, 1)
	require.False(t, entry[0].PrependShell, "exec-form ENTRYPOINT: signals reach diskcanary, not a shell")
	require.Equal(t, []string{copied}, entry[0].CmdLine)
	cmd := commands[*instructions.CmdCommand](runtime)
	require.Len(t, cmd, 1)
	require.False(t, cmd[0].PrependShell)
	require.Equal(t, []string{"serve"}, cmd[0].CmdLine)

	users := commands[*instructions.UserCommand](runtime)
	require.NotEmpty(t, users, "the image must not run as root by default")
	user := users[len(users)-1].User
	uid, _, _ := strings.Cut(user, ":")
	n, err := strconv.Atoi(uid)
	require.NoError(t, err, "USER %q: numeric, so Kubernetes runAsNonRoot can verify it", user)
	require.NotZero(t, n, "USER is root")

	var ports []string
	for _, e := range commands[*instructions.ExposeCommand](runtime) {
		ports = append(ports, e.Ports...)
	}
	require.Subset(t, []string{metricsPort, metricsPort + "/tcp"}, ports)
	require.Len(t, ports, 1)
}

// The checks above must be able to fail: a Dockerfile that breaks each
// rule is refused.
func TestDockerfileChecksCatchMistakes(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	check := func(src []byte) (failed bool) {
		ft := &fakeT{}
		defer func() {
			if r := recover(); r != nil && r != ft {
				panic(r)
			}
			failed = ft.failed
		}()
		checkDockerfile(ft, src)
		return ft.failed
	}
	require.False(t, check(src), "the real Dockerfile passes through fakeT")
	for name, edit := range map[string][2]string{
		"shell-form entrypoint": {`ENTRYPOINT ["/usr/bin/diskcanary"]`, `ENTRYPOINT /usr/bin/diskcanary`},
		"root user":             {"USER 65532:65532", "USER 0"},
		"named user":            {"USER 65532:65532", "USER nobody"},
		"wrong binary path":     {"COPY --from=build /out/diskcanary /usr/bin/diskcanary", "COPY --from=build /out/diskcanary /usr/local/bin/diskcanary"},
		"copied another path":   {"COPY --from=build /out/diskcanary", "COPY --from=build /src/diskcanary"},
		"port":                  {"EXPOSE 9742", "EXPOSE 9100"},
		"no smartctl":           {"smartmontools", "procps"},
		"old go":                {"GO_VERSION=1.26.8", "GO_VERSION=1.22.0"},
		"lint: lowercase as":    {"AS build", "as build"},
		"cmd shell form":        {`CMD ["serve"]`, `CMD serve`},
	} {
		bad := strings.Replace(string(src), edit[0], edit[1], 1)
		require.NotEqual(t, string(src), bad, name)
		require.True(t, check([]byte(bad)), "%s: not caught", name)
	}
}

// fakeT records a failure and stops the check, as testing.T would.
type fakeT struct{ failed bool }

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) FailNow()              { f.failed = true; panic(f) }

// TestBuildStampsVersion builds through deploy/build.sh, as the Dockerfile
// does, and checks the binary is static and reports the stamped version both
// in `diskcanary version` and in diskcanary_build_info.
func TestBuildStampsVersion(t *testing.T) {
	testkit.E2E(t)
	bin := filepath.Join(t.TempDir(), "diskcanary")
	build := exec.Command("./deploy/build.sh", bin)
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "VERSION=1.2.3-test", "REVISION=0123abc", "BRANCH=ship-it",
		"BUILD_USER=builder@ci", "BUILD_DATE=20261123-11:22:33")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	// Static: no program interpreter and no shared libraries, so it runs on
	// Debian slim, distroless or a bare host alike.
	f, err := elf.Open(bin)
	require.NoError(t, err)
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "dynamically linked (CGO_ENABLED=0 lost?)")
	}
	libs, _ := f.ImportedLibraries()
	require.Empty(t, libs)
	f.Close()

	out, err = exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "diskcanary, version 1.2.3-test (branch: ship-it, revision: 0123abc)")
	require.Contains(t, string(out), "build user:       builder@ci")
	require.Contains(t, string(out), "build date:       20261123-11:22:33")

	addr := testkit.FreeAddr(t)
	serve := exec.Command(bin, "serve", "--web.listen-address", addr, "--no-collector.probes", "--no-collector.smart")
	var logs bytes.Buffer
	serve.Stdout, serve.Stderr = &logs, &logs
	require.NoError(t, serve.Start())
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	var body string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		break
	}
	var info string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "diskcanary_build_info{") {
			info = sc.Text()
		}
	}
	require.NotEmpty(t, info, "no diskcanary_build_info in /metrics")
	for _, l := range []string{`version="1.2.3-test"`, `revision="0123abc"`, `branch="ship-it"`} {
		require.Contains(t, info, l)
	}
	require.True(t, strings.HasSuffix(info, " 1"), info)
}
