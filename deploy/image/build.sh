#!/bin/sh
# Builds the diskcanary container image localhost/diskcanary:VERSION with
# buildah (or podman) from this Debian machine's own packages, no registry:
#
#   deploy/image/build.sh VERSION          e.g. deploy/image/build.sh 0.1.0
#
# The image is FROM scratch (deploy/image/Containerfile): the static binaries
# of deploy/build.sh (diskcanary, and diskcanary-plot, which draws a
# capacity sweep's curve), /usr/sbin/smartctl of the smartmontools package with
# its drive database and each shared library ldd lists (merged /usr, as
# Debian lays it out), and the copyright files of those packages. Its labels
# name the Debian package versions inside. File times and the image's
# creation time are the commit's (SOURCE_DATE_EPOCH), so two builds of one
# commit on one Debian release give the same layer.
#
# It runs as uid 65532. Probes and diskstats need nothing more:
#   podman run -d --pid=host --network=host \
#     -v /proc:/host/proc:ro -v /sys:/host/sys:ro -v /var/lib/diskcanary:/var/lib/diskcanary \
#     localhost/diskcanary:VERSION serve --path.procfs=/host/proc --path.sysfs=/host/sys \
#     --probe.dir=/var/lib/diskcanary
# SMART needs what the DaemonSet of deploy/kubernetes/smart grants: root,
# privileged (the device cgroup) and the host's /dev:
#   --user 0 --privileged -v /dev:/dev:ro ... serve --collector.smart
#
# Exit status: 64 on a usage error, 69 when a tool or package is missing.
set -eu
usage() { echo "usage: $0 VERSION   (e.g. 0.1.0; builds localhost/diskcanary:VERSION)" >&2; exit 64; }
[ $# -eq 1 ] || usage
VERSION=$1
# An image tag: letters, digits, '.', '_', '-', at most 128, not starting with '.' or '-'.
printf '%s\n' "$VERSION" | grep -Eq '^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$' || {
	echo "$0: $VERSION is not a valid image tag" >&2; usage; }
cd "$(dirname "$0")/../.."
image=localhost/diskcanary:$VERSION

if command -v buildah >/dev/null; then build="buildah build --layers=false"
elif command -v podman >/dev/null; then build="podman build"
else echo "$0: needs buildah or podman (apt-get install buildah)" >&2; exit 69; fi
smartctl=/usr/sbin/smartctl
[ -x "$smartctl" ] || { echo "$0: needs $smartctl (apt-get install smartmontools)" >&2; exit 69; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs
# /tmp and /var/tmp as on Debian: the default probe directory is under /var/tmp.
mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib" "$root/usr/share/doc" "$root/tmp" "$root/var/tmp"
chmod 1777 "$root/tmp" "$root/var/tmp"
for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done

SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
VERSION=$VERSION BUILD_DATE=${BUILD_DATE:-$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d-%H:%M:%S)} \
	BUILD_USER=${BUILD_USER:-deploy/image} ./deploy/build.sh "$root/usr/bin/diskcanary"
VERSION=$VERSION BUILD_DATE=${BUILD_DATE:-$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d-%H:%M:%S)} \
	BUILD_USER=${BUILD_USER:-deploy/image} ./deploy/build.sh "$root/usr/bin/diskcanary-plot" diskcanary-plot

# The files, each under /usr (a path ldd prints under /lib is the same file
# there on a merged-/usr Debian), and the package that owns each.
files="$smartctl /usr/share/smartmontools/drivedb.h $(ldd "$smartctl" | grep -o '/[^ ]*')"
pkgs=
for f in $files; do
	case $f in /usr/*) dest=$f ;; *) dest=/usr$f ;; esac
	mkdir -p "$root$(dirname "$dest")"
	cp -L "$f" "$root$dest"
	pkg=$(dpkg -S "$f" 2>/dev/null || dpkg -S "$(readlink -f "$f")") ||
		{ echo "$0: $f belongs to no Debian package" >&2; exit 69; }
	pkgs="$pkgs ${pkg%%:*}"
done
labels=
for p in $(printf '%s\n' $pkgs | sort -u); do
	mkdir -p "$root/usr/share/doc/$p"
	cp -L "/usr/share/doc/$p/copyright" "$root/usr/share/doc/$p/"
	labels="$labels${labels:+,}$p=$(dpkg-query -W -f='${Version}' "$p")"
done
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

$build --timestamp "$SOURCE_DATE_EPOCH" -f deploy/image/Containerfile -t "$image" \
	--label org.opencontainers.image.title=diskcanary \
	--label org.opencontainers.image.version="$VERSION" \
	--label org.opencontainers.image.revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
	--label org.opencontainers.image.source=https://github.com/diskcanary/diskcanary \
	--label io.diskcanary.debian-packages="$labels" \
	"$ctx"
