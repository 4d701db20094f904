#!/bin/bash
# rootfs.sh [ARCH]   - build a Debian userland of ARCH; print its directory
#
# A guest of another architecture than the host's (make vmtest-arm64)
# cannot run the host's root, which boot.sh shares with a guest of the
# host's own: it gets this instead, shared read-only the same way (boot.sh
# -R). It is Debian 12 (bookworm, as the host), ARCH (default arm64),
# with what guest.sh and the tests run: busybox-static (also the
# initramfs's busybox), the essential tools, util-linux (setpriv,
# unshare), linux-perf (the oracle: Debian 12's perf 6.1, as on the
# host), binutils (readelf), gcc with libc6-dev (the tests' C workloads),
# python3 with python3-fusepy (the hung FUSE server), and their
# dependencies. Go is not in it: run.sh cross-builds the test binaries
# and synth on the host.
#
# mmdebstrap's extract variant fetches the packages with their
# dependencies and unpacks them (dpkg -x), running no maintainer script,
# so that nothing of ARCH has to run on the host (no qemu-user, no
# binfmt). /usr is merged, as on the host (/bin, /sbin, /lib link to
# /usr's, by mmdebstrap's merged-usr hook): the tests look for
# /usr/lib/TRIPLET/libc.so.6. What the maintainer scripts would have
# made, this makes: /etc/passwd and /etc/group from base-passwd's
# masters, the alternative the tools are called by (awk), /etc/mtab, the
# mount points, and /etc/ld.so.cache (python's ctypes finds libfuse
# through `ldconfig -p`), which ARCH's own static ldconfig writes, run by
# qemu-user-static's emulator: that comes from Debian's package unpacked
# under $VMTEST_CACHE, not installed, so that the host's binfmt_misc is
# left as it is.
#
# It goes to $VMTEST_CACHE/ARCH/rootfs (default cache
# /var/cache/synth-vmtest; about 415 MB), built once: it is rebuilt only
# when the package list below changes (recorded in its /.vmtest-rootfs),
# or after VMTEST_ROOTFS_REFRESH=1. It installs mmdebstrap if missing.
set -eu

arch=${1:-arm64}
cache=${VMTEST_CACHE:-/var/cache/synth-vmtest}
suite=bookworm
mirror=http://deb.debian.org/debian
pkgs="base-files base-passwd bash busybox-static coreutils dash debianutils diffutils findutils grep gzip
hostname libc-bin mawk procps sed tar util-linux mount
linux-perf binutils gcc libc6-dev python3 python3-fusepy fuse"
pkgs=$(echo $pkgs)
dir=$cache/$arch/rootfs
stamp="$suite $arch merged-usr pyc $pkgs"

if [ -f "$dir/.vmtest-rootfs" ] && [ "$(cat "$dir/.vmtest-rootfs")" = "$stamp" ] && [ "${VMTEST_ROOTFS_REFRESH:-}" != 1 ]; then
	echo "$dir"
	exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
	echo "rootfs: installing mmdebstrap" >&2
	apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
fi

case $arch in
arm64) qarch=aarch64 ;;
*) echo "$0: $arch: which qemu-user emulator runs it?" >&2; exit 2 ;;
esac

mkdir -p "$cache/$arch"
tmp=$(mktemp -d "$cache/$arch/.rootfs.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "rootfs: building a Debian $suite $arch userland into $dir" >&2
mmdebstrap --quiet --variant=extract --arch="$arch" --include="${pkgs// /,}" \
	--setup-hook='/usr/share/mmdebstrap/hooks/merged-usr/setup00.sh "$1" >/dev/null' \
	--aptopt='Acquire::Retries "3"' "$suite" "$tmp/root" \
	"deb $mirror $suite main" "deb $mirror $suite-updates main" \
	"deb http://deb.debian.org/debian-security $suite-security main" >&2
r=$tmp/root

# What the maintainer scripts would have made.
[ -e "$r/etc/passwd" ] || cp "$r/usr/share/base-passwd/passwd.master" "$r/etc/passwd"
[ -e "$r/etc/group" ] || cp "$r/usr/share/base-passwd/group.master" "$r/etc/group"
[ -e "$r/usr/bin/awk" ] || ln -s mawk "$r/usr/bin/awk"
[ -e "$r/etc/mtab" ] || ln -s ../proc/self/mounts "$r/etc/mtab"
mkdir -p "$r/proc" "$r/sys" "$r/dev" "$r/run" "$r/tmp" "$r/var/tmp" "$r/root"
chmod 1777 "$r/tmp" "$r/var/tmp"
chmod 700 "$r/root"
echo vmtest >"$r/etc/hostname"

# /etc/ld.so.cache, by ARCH's ldconfig (static) under qemu-user.
q=$cache/qemu-user-static
if [ ! -x "$q/usr/bin/qemu-$qarch-static" ]; then
	rm -rf "$q.tmp" && mkdir -p "$q.tmp"
	chmod 755 "$q.tmp" && chown _apt "$q.tmp" 2>/dev/null || true
	(cd "$q.tmp" && apt-get download -q qemu-user-static) >&2
	dpkg-deb -x "$q.tmp"/qemu-user-static_*.deb "$q.tmp/x"
	mkdir -p "$q/usr/bin" # that emulator alone: all of them take 370 MB
	mv "$q.tmp/x/usr/bin/qemu-$qarch-static" "$q/usr/bin/" && rm -rf "$q.tmp"
fi
"$q/usr/bin/qemu-$qarch-static" "$r/sbin/ldconfig" -r "$r"

# Python's bytecode, which py3compile (a maintainer script) would have
# written: without it every python3 in the guest compiles what it
# imports, on a read-only root, each time, and under TCG the tests' FUSE
# server then takes seconds to come up. Bytecode is the same on every
# architecture: the host's python3 of the same version writes it
# (mmdebstrap depends on python3; a host of another Debian release goes
# without).
v=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ -x "$r/usr/bin/python$v" ]; then
	/usr/bin/python3 -m compileall -q -j 0 -s "$r" -p / "$r/usr/lib/python$v" "$r/usr/lib/python3/dist-packages" >/dev/null ||
		echo "rootfs: warning: some of python$v's modules did not compile" >&2
else
	echo "rootfs: warning: the host's python3 is $v, not the $arch userland's: no bytecode" >&2
fi

# The tools must be there (and be ARCH's).
for t in sh awk sed grep mktemp tee cat timeout dd cp sleep true setpriv unshare mount perf readelf gcc python3 busybox ldconfig; do
	PATH=$r/usr/sbin:$r/usr/bin:$r/sbin:$r/bin command -v "$t" >/dev/null ||
		{ echo "$0: the $arch userland has no $t" >&2; exit 1; }
done
grep -qa 'libfuse\.so\.2' "$r/etc/ld.so.cache" || { echo "$0: libfuse.so.2 is not in the $arch userland's ld.so.cache" >&2; exit 1; }

echo "$stamp" >"$r/.vmtest-rootfs"
rm -rf "$dir"
mv "$r" "$dir"
echo "rootfs: $(du -sh "$dir" | cut -f1) in $dir" >&2
echo "$dir"
