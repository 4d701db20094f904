#!/bin/bash
# kernel.sh PKG [CACHEDIR]  - fetch a Debian kernel image package, unpacked
# kernel.sh --newest SERIES - print the newest linux-image package of SERIES
#
# The VM tests (see boot.sh) boot stock Debian kernels under QEMU to check
# synth against kernels other than the host's. This fetches one image
# package with `apt-get download` (no installation, nothing touches the
# host's /boot) and unpacks it with `dpkg-deb -x` into CACHEDIR/PKG/, which
# then holds boot/vmlinuz-VERSION and lib/modules/VERSION/. It prints that
# directory. Idempotent: an already unpacked package is not fetched again.
#
# --newest 6.1 prints e.g. linux-image-6.1.0-56-amd64, --newest 6.12 e.g.
# linux-image-6.12.117+deb12-amd64: the generic amd64 flavour (not cloud or
# rt), the signed package when the archive has it, else the -unsigned one
# (both ship the same vmlinuz and modules).
#
# With VMTEST_APT_SUITE set (e.g. trixie-backports, for a kernel of the
# host's series, 6.18), both look in that Debian suite instead, through an
# apt state of their own under the cache directory: the host's apt sources
# are left as they are.
set -eu

cache=${VMTEST_CACHE:-/var/cache/synth-vmtest}
apt_opts=()
if [ -n "${VMTEST_APT_SUITE:-}" ]; then
	st=$cache/apt-$VMTEST_APT_SUITE
	mkdir -p "$st/lists/partial" "$st/cache/archives/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $VMTEST_APT_SUITE main" >"$st/sources.list"
	apt_opts=(-o "Dir::Etc::SourceList=$st/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$st/lists" -o "Dir::Cache=$st/cache")
	# Refresh the suite's package lists at most once a day.
	if [ -z "$(find "$st/lists" -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
		apt-get "${apt_opts[@]}" update -q >&2
	fi
fi

usage() { echo "usage: $0 PKG [CACHEDIR] | $0 --newest SERIES" >&2; exit 2; }

if [ "${1-}" = --newest ]; then
	[ $# = 2 ] || usage
	series=$(printf '%s' "$2" | sed 's/\./\\./g')
	names=$(apt-cache "${apt_opts[@]}" search --names-only "^linux-image-$series[.-]" |
		awk '{print $1}' |
		grep -E "^linux-image-$series[.-][0-9.]*[-+][0-9a-z.+-]*amd64(-unsigned)?\$" |
		grep -Ev -- '-(cloud|rt)-amd64' || true)
	newest=$(printf '%s\n' "$names" | sed 's/-unsigned$//' | sort -uV | tail -n 1)
	[ -n "$newest" ] || { echo "$0: no linux-image package for $2" >&2; exit 1; }
	if printf '%s\n' "$names" | grep -qxF "$newest"; then
		echo "$newest"
	else
		echo "$newest-unsigned"
	fi
	exit 0
fi

[ $# = 1 ] || [ $# = 2 ] || usage
pkg=$1
cache=${2:-$cache}
dir=$cache/$pkg

if ! ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1; then
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.download.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# apt drops to the _apt user to download; let it write here.
	chmod 755 "$tmp" && chown _apt "$tmp" 2>/dev/null || true
	(cd "$tmp" && apt-get "${apt_opts[@]}" download -q "$pkg") >&2
	mkdir "$tmp/x"
	dpkg-deb -x "$tmp"/*.deb "$tmp/x"
	ls "$tmp"/x/boot/vmlinuz-* >/dev/null 2>&1 ||
		{ echo "$0: $pkg has no boot/vmlinuz-*" >&2; exit 1; }
	rm -rf "$dir"
	mv "$tmp/x" "$dir"
fi
echo "$dir"
