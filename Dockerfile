# syntax=docker/dockerfile:1
#
# diskcanary container image: a static binary on Debian slim with smartctl,
# for building with docker from Docker Hub's golang and debian images. The
# released image (ghcr.io/diskcanary/diskcanary) is built without a registry
# by deploy/image/build.sh: FROM scratch, the same binary and smartctl.
#
#   docker build -t diskcanary \
#     --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg BRANCH=$(git rev-parse --abbrev-ref HEAD) .
#
# The image runs as uid 65532 (no root): probes and diskstats need nothing
# more. SMART needs root with CAP_SYS_RAWIO and CAP_SYS_ADMIN and the host's
# block devices; see docs/deploy.md and deploy/kubernetes/smart.

# GO_VERSION is the Go toolchain: at least go.mod's go directive (a test checks).
ARG GO_VERSION=1.26.8
# DEBIAN_RELEASE is the Debian release of both stages.
ARG DEBIAN_RELEASE=trixie

FROM golang:${GO_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.0.0-dev
ARG REVISION=unknown
ARG BRANCH=unknown
ARG BUILD_USER=container-build
ARG BUILD_DATE
RUN ./deploy/build.sh /out/diskcanary

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# smartctl for the SMART collector; ca-certificates is not needed (no
# outbound TLS). --no-install-recommends keeps mail and cron daemons out.
RUN apt-get update \
 && apt-get install -y --no-install-recommends smartmontools \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/diskcanary /usr/bin/diskcanary
# A numeric uid, so Kubernetes runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532
EXPOSE 9742
ENTRYPOINT ["/usr/bin/diskcanary"]
CMD ["serve"]
