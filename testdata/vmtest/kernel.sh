#!/bin/bash
# kernel.sh PKG [CACHEDIR]  - fetch a Debian kernel, unpacked; print its directory
# kernel.sh --newest SERIES - print the newest kernel package of SERIES
# kernel.sh --newest-debian - print "SUITE PKG": the newest kernel Debian ships
#
# The VM tests (see boot.sh) boot stock Debian kernels under QEMU to check
# synth against kernels other than the host's. This fetches a kernel with
# `apt-get download` (no installation, nothing touches the host's /boot)
# and unpacks it with `dpkg-deb -x` into CACHEDIR/PKG/, which then holds
# boot/vmlinuz-VERSION and [usr/]lib/modules/VERSION/ (modules.builtin
# included). It prints that directory. Idempotent: an already unpacked
# kernel is not fetched again.
#
# Debian packages a kernel in one of two layouts. Up to 6.18, one package,
# linux-image-VERSION (or linux-image-VERSION-unsigned), holds it all. From
# 6.19 on, linux-image-VERSION is an empty metapackage and the kernel is
# split in three: linux-binary-VERSION (or linux-binary-unsigned-VERSION)
# with usr/lib/modules/VERSION/vmlinuz (the unsigned one's is
# vmlinuz.unsigned), linux-base-VERSION with the config and
# modules.builtin, linux-modules-VERSION with the modules. PKG is then
# the linux-binary name (a split linux-image name is taken for it): this
# fetches the three and links boot/vmlinuz-VERSION to the vmlinuz, so that
# both layouts unpack to the same shape.
#
# --newest prints a PKG: --newest 6.1 e.g. linux-image-6.1.0-56-amd64,
# --newest 6.12 e.g. linux-image-6.12.117+deb12-amd64, --newest 7.3 (in
# trixie-backports) e.g. linux-binary-7.3.4+deb13-amd64; SERIES may be a
# major version alone (7). It picks the generic flavour (not cloud
# or rt: cloud has no 9p), the signed package when the archive has it,
# else the unsigned one (both ship the same vmlinuz and modules), and
# skips a split kernel whose base or modules the suite no longer has
# (trixie-backports keeps only the signed binary of 6.19 to 7.1).
#
# --newest-debian resolves at run time the newest such kernel, any series,
# of trixie-backports, forky and sid (by package version), and prints one
# line "SUITE PKG", e.g. "trixie-backports linux-binary-7.3.4+deb13-amd64":
# fetch it with VMTEST_APT_SUITE=SUITE kernel.sh PKG. It ignores
# VMTEST_APT_SUITE.
#
# With VMTEST_APT_SUITE set (e.g. trixie-backports, for a kernel of the
# host's series, 6.18; bullseye-security for 5.10), --newest and the fetch
# look in that Debian suite instead (a *-security suite on the security
# mirror), through an apt state of their own under $VMTEST_CACHE (default
# /var/cache/synth-vmtest, also the default CACHEDIR), refreshed daily:
# the host's apt sources are left as they are.
#
# VMTEST_ARCH (default amd64) picks the Debian architecture, and
# VMTEST_FLAVOUR (default: the architecture) the kernel flavour: arm64,
# or arm64-16k for Debian's kernel with 16K pages (arm64 has no 64K
# flavour): VMTEST_ARCH=arm64 VMTEST_FLAVOUR=arm64-16k
# VMTEST_APT_SUITE=trixie-security kernel.sh --newest 6.12 prints e.g.
# linux-image-6.12.118+deb13-arm64-16k (Debian signs arm64 kernels too:
# boot/vmlinuz is then an uncompressed Image, which QEMU boots as it is).
# Another architecture than the host's needs VMTEST_APT_SUITE (the
# host's apt has none of its packages), and has apt states of its own,
# $VMTEST_CACHE/apt-SUITE-ARCH, whose apt sees that architecture alone
# and no installed package.
set -eu

cache=${VMTEST_CACHE:-/var/cache/synth-vmtest}
newest_suites="trixie-backports forky sid"
arch=${VMTEST_ARCH:-amd64}
flavour=${VMTEST_FLAVOUR:-$arch}
foreign=
[ "$arch" = "$(dpkg --print-architecture)" ] || foreign=1

# suite SUITE points apt_opts at SUITE's own apt state (the host's for "").
suite() {
	apt_opts=()
	if [ -z "$1" ]; then
		[ -z "$foreign" ] || { echo "$0: VMTEST_ARCH=$arch needs VMTEST_APT_SUITE" >&2; exit 2; }
		return 0
	fi
	local st=$cache/apt-$1 url=http://deb.debian.org/debian
	[ -z "$foreign" ] || st=$st-$arch
	case $1 in *-security) url=http://deb.debian.org/debian-security ;; esac
	mkdir -p "$st/lists/partial" "$st/cache/archives/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $url $1 main" >"$st/sources.list"
	apt_opts=(-o "Dir::Etc::SourceList=$st/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$st/lists" -o "Dir::Cache=$st/cache")
	if [ -n "$foreign" ]; then
		# That architecture's packages only, none installed.
		: >>"$st/status"
		apt_opts+=(-o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" -o "Dir::State::status=$st/status")
	fi
	# Refresh the suite's package lists at most once a day.
	if [ -z "$(find "$st/lists" -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
		apt-get "${apt_opts[@]}" update -q >&2
	fi
}

# newest SERIES prints the newest complete kernel PKG of SERIES (an ERE)
# in the current suite, or nothing.
newest() {
	local names v re="($1[.-][0-9.]*[-+][0-9a-z.+-]*$flavour)"
	names=$(apt-cache "${apt_opts[@]}" search --names-only '^linux-(image|binary|base|modules)-' | awk '{print $1}')
	has() { printf '%s\n' "$names" | grep -qxF "$1"; }
	# The versions, newest first; a split kernel has an image name too.
	for v in $(printf '%s\n' "$names" |
		sed -nE -e "s/^linux-image-$re(-unsigned)?\$/\\1/p" -e "s/^linux-binary-(unsigned-)?$re\$/\\2/p" |
		grep -Ev -- "-(cloud|rt)-$flavour\$" | sort -uV | tac); do
		if has "linux-binary-$v" || has "linux-binary-unsigned-$v"; then
			# Older split kernels linger as their signed part alone.
			has "linux-base-$v" && has "linux-modules-$v" || continue
			if has "linux-binary-$v"; then echo "linux-binary-$v"; else echo "linux-binary-unsigned-$v"; fi
		elif has "linux-image-$v"; then
			echo "linux-image-$v"
		else
			echo "linux-image-$v-unsigned"
		fi
		return
	done
}

usage() { echo "usage: $0 PKG [CACHEDIR] | $0 --newest SERIES | $0 --newest-debian" >&2; exit 2; }

case ${1-} in
--newest)
	[ $# = 2 ] || usage
	suite "${VMTEST_APT_SUITE:-}"
	pkg=$(newest "$(printf '%s' "$2" | sed 's/\./\\./g')")
	[ -n "$pkg" ] || { echo "$0: no complete kernel of $2 in ${VMTEST_APT_SUITE:-the host apt sources}" >&2; exit 1; }
	echo "$pkg"
	exit 0
	;;
--newest-debian)
	[ $# = 1 ] || usage
	best= bestver=
	for s in $newest_suites; do
		suite "$s"
		pkg=$(newest '[0-9]+\.[0-9]+')
		[ -n "$pkg" ] || continue
		# Compare package versions, not names: 6.1.0-56 is 6.1.153.
		ver=$(apt-cache "${apt_opts[@]}" show --no-all-versions "$pkg" | sed -n 's/^Version: //p')
		if [ -z "$best" ] || dpkg --compare-versions "$ver" gt "$bestver"; then
			best="$s $pkg" bestver=$ver
		fi
	done
	[ -n "$best" ] || { echo "$0: no kernel in $newest_suites" >&2; exit 1; }
	echo "$best"
	exit 0
	;;
-*) usage ;;
esac

[ $# = 1 ] || [ $# = 2 ] || usage
pkg=$1
dest=${2:-$cache} # the apt states stay in $cache
dir=$dest/$pkg

if ! ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1; then
	suite "${VMTEST_APT_SUITE:-}"
	# A split kernel's image is only a metapackage: fetch its parts.
	if [[ $pkg = linux-image-* ]] &&
		apt-cache "${apt_opts[@]}" show --no-all-versions "$pkg" 2>/dev/null | grep -q '^Depends:.* linux-binary-'; then
		pkg=linux-binary-${pkg#linux-image-}
		dir=$dest/$pkg
	fi
	pkgs=("$pkg")
	if [[ $pkg = linux-binary-* ]]; then
		v=${pkg#linux-binary-} && v=${v#unsigned-}
		pkgs+=("linux-base-$v" "linux-modules-$v")
	fi
fi
if ! ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1; then
	mkdir -p "$dest"
	tmp=$(mktemp -d "$dest/.download.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# apt drops to the _apt user to download; let it write here.
	chmod 755 "$tmp" && chown _apt "$tmp" 2>/dev/null || true
	(cd "$tmp" && apt-get "${apt_opts[@]}" download -q "${pkgs[@]}") >&2
	mkdir "$tmp/x"
	for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/x"; done
	if [[ $pkg = linux-binary-* ]]; then
		# The unsigned binary's is vmlinuz.unsigned.
		m=usr/lib/modules/$v
		k=$(cd "$tmp/x/$m" && ls vmlinuz vmlinuz.unsigned 2>/dev/null | head -n 1) || true
		[ -n "$k" ] && [ -f "$tmp/x/$m/modules.builtin" ] ||
			{ echo "$0: ${pkgs[*]} have no $m/vmlinuz and modules.builtin" >&2; exit 1; }
		mkdir -p "$tmp/x/boot"
		ln -s "../$m/$k" "$tmp/x/boot/vmlinuz-$v"
	fi
	ls "$tmp"/x/boot/vmlinuz-* >/dev/null 2>&1 ||
		{ echo "$0: $pkg has no boot/vmlinuz-*" >&2; exit 1; }
	rm -rf "$dir"
	mv "$tmp/x" "$dir"
fi
echo "$dir"
