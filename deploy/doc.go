// Package deploy holds diskcanary's installation artefacts and the tests that
// keep them honest: the Dockerfile (at the repository root) parsed with
// BuildKit's parser, the Kubernetes manifests decoded strictly with the
// k8s.io/api types, the Helm chart (deploy/helm/diskcanary) rendered with
// Helm's Go library and decoded the same way, and the systemd unit checked
// with systemd-analyze. The PrometheusRule (deploy/kubernetes/base) and the
// chart's files/ are not written here: tools/rulegen generates them with
// the rule file and the dashboards (go generate ./...).
// deploy/build.sh is the one way to build a release binary, and
// deploy/image/build.sh the image people pull (image_test.go builds, runs
// and scrapes it with podman).
package deploy
