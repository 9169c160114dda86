#!/bin/sh
# Builds a static diskcanary binary with its version information stamped in,
# so `diskcanary version` and diskcanary_build_info say what is running; or,
# named, another command of cmd/ (diskcanary-plot) with the same flags.
# The Dockerfile, the binary install (docs/deploy.md) and deploy/docker_test.go all
# build through this script: one set of ldflags.
#
#   deploy/build.sh [OUTPUT [COMMAND]]  default OUTPUT: ./COMMAND, COMMAND: diskcanary
#
# VERSION, REVISION, BRANCH, BUILD_USER and BUILD_DATE override what git
# and the environment say (the container build passes them as build args,
# because .git is not in the build context).
set -eu
cd "$(dirname "$0")/.."
command=${2:-diskcanary}
case $command in diskcanary|diskcanary-plot) ;; *) echo "$0: no command $command in cmd/" >&2; exit 64 ;; esac
out=${1:-$command}

VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
BRANCH=${BRANCH:-$(git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)}
BUILD_USER=${BUILD_USER:-$(id -un 2>/dev/null || echo unknown)@$(uname -n)}
BUILD_DATE=${BUILD_DATE:-$(date -u +%Y%m%d-%H:%M:%S)}

# prometheus/common/version is what diskcanary_build_info and `version` read.
pkg=github.com/prometheus/common/version
CGO_ENABLED=0 exec go build -trimpath \
	-ldflags "-s -w -X $pkg.Version=$VERSION -X $pkg.Revision=$REVISION -X $pkg.Branch=$BRANCH -X $pkg.BuildUser=$BUILD_USER -X $pkg.BuildDate=$BUILD_DATE" \
	-o "$out" "./cmd/$command"
