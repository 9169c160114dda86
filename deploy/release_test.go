package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/version"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// workflow is the part of a GitHub Actions workflow the release test reads.
type workflow struct {
	On struct {
		Push struct {
			Tags []string `yaml:"tags"`
		} `yaml:"push"`
	} `yaml:"on"`
	Env  map[string]string `yaml:"env"`
	Jobs map[string]struct {
		Needs    any `yaml:"needs"`
		Strategy struct {
			Matrix map[string]any `yaml:"matrix"`
		} `yaml:"strategy"`
		Steps []struct {
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]any    `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// repoPath matches a path into the repository in a shell script.
var repoPath = regexp.MustCompile(`(?:^|[\s"'])\.?/?((?:deploy|\.ci|alerts|mixin|dashboards|tools)/[A-Za-z0-9_./-]*[A-Za-z0-9_])`)

// TestReleaseWorkflow: .github/workflows/release.yml cannot run here, so
// it is checked for what it relies on: it parses, runs on v* tags, needs
// the tests before publishing, builds the binaries through deploy/build.sh
// (whose ldflags stamp prometheus/common/version) for amd64 and arm64, the
// image through deploy/image/build.sh to the repository the chart and the
// kustomize base pull, and packages the chart; every repository path it
// names exists.
func TestReleaseWorkflow(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, ".github/workflows/release.yml"))
	require.NoError(t, err)
	var wf workflow
	dec := yaml.NewDecoder(strings.NewReader(string(src)))
	dec.KnownFields(false)
	require.NoError(t, dec.Decode(&wf))
	require.Equal(t, []string{"v*"}, wf.On.Push.Tags)

	for _, job := range []string{"test", "binaries", "image", "manifest", "chart", "release"} {
		require.Contains(t, wf.Jobs, job)
	}
	// Nothing is published before the tests pass.
	for _, job := range []string{"binaries", "image", "chart"} {
		require.Equal(t, "test", wf.Jobs[job].Needs, job)
	}
	require.Equal(t, []any{"amd64", "arm64"}, wf.Jobs["binaries"].Strategy.Matrix["goarch"])

	var scripts []string
	for name, job := range wf.Jobs {
		for _, s := range job.Steps {
			if s.Uses == "actions/setup-go@v5" {
				require.Equal(t, "go.mod", s.With["go-version-file"], name)
			}
			if s.Run != "" {
				scripts = append(scripts, s.Run)
			}
			for k := range s.Env {
				// The variables deploy/build.sh reads, and no misspelt one.
				if name == "binaries" {
					require.Contains(t, []string{"GOARCH", "BRANCH", "BUILD_USER"}, k)
				}
			}
		}
	}
	all := strings.Join(scripts, "\n")
	paths := map[string]bool{}
	for _, m := range repoPath.FindAllStringSubmatch(all, -1) {
		paths[m[1]] = true
	}
	for p := range paths {
		_, err := os.Stat(filepath.Join(repoRoot, p))
		require.NoError(t, err, "the release workflow names %s", p)
	}
	for _, p := range []string{".ci/run", "deploy/build.sh", "deploy/image/build.sh", "deploy/helm/diskcanary"} {
		require.True(t, paths[p], "the release workflow does not run %s", p)
	}
	// Both binaries: the daemon, and the plot command kept out of it.
	require.Contains(t, all, `./deploy/build.sh "dist/$dir/diskcanary"`+"\n")
	require.Contains(t, all, `./deploy/build.sh "dist/$dir/diskcanary-plot" diskcanary-plot`+"\n")
	require.Contains(t, all, "helm package deploy/helm/diskcanary")
	require.Contains(t, all, "sha256sum ")

	// The binaries' version: build.sh's ldflags set prometheus/common/version,
	// and the workflow hands it the variables build.sh reads.
	build, err := os.ReadFile(filepath.Join(repoRoot, "deploy/build.sh"))
	require.NoError(t, err)
	require.Contains(t, string(build), "pkg=github.com/prometheus/common/version")
	// The variables exist in the package (this compiles only if they do).
	_ = []*string{&version.Version, &version.Revision, &version.Branch, &version.BuildUser, &version.BuildDate}
	for env, v := range map[string]string{"VERSION": "Version", "REVISION": "Revision", "BRANCH": "Branch",
		"BUILD_USER": "BuildUser", "BUILD_DATE": "BuildDate"} {
		require.Contains(t, string(build), "-X $pkg."+v+"=$"+env, v)
		require.Contains(t, string(build), env+"=${"+env+":-", "build.sh reads %s from the environment", env)
	}
	for _, v := range []string{"VERSION=", "BUILD_DATE="} {
		require.Contains(t, all, v)
	}

	// The image goes where the chart and the kustomize base pull it from.
	chrt, err := loader.Load(chartDir)
	require.NoError(t, err)
	img := chrt.Values["image"].(map[string]any)
	require.Equal(t, img["registry"].(string)+"/"+img["repository"].(string), wf.Env["IMAGE"])
	base := loadBase(t)
	require.Equal(t, wf.Env["IMAGE"]+":"+chrt.Metadata.AppVersion, container(t, base.daemonSet, "diskcanary").Image)
	require.Contains(t, all, `buildah push "localhost/diskcanary:$VERSION"`)
	require.True(t, slices.ContainsFunc(scripts, func(s string) bool {
		return strings.Contains(s, `deploy/image/build.sh "$VERSION"`)
	}))
}
