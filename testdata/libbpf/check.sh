#!/bin/bash
# check.sh SUITE
#
# Regenerates the committed BPF objects against the libbpf headers of
# Debian SUITE's libbpf-dev (bookworm has 1.1, trixie 1.5), downloaded
# with apt-get download into CACHE/libbpf-SUITE (nothing is installed),
# and fails if the objects differ from the committed ones. clang finds
# those headers first through C_INCLUDE_PATH; bpf/gen_test.go does the
# rest, as make check-generate does with the host's headers.
set -euo pipefail
suite=${1:?usage: check.sh SUITE}
cache=${CACHE:-/var/cache/synth-vmtest}/libbpf-$suite
mkdir -p "$cache/lists/partial" "$cache/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" >"$cache/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$cache/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$cache/lists" -o "Dir::Cache=$cache/cache")
if [ ! -d "$cache/root/usr/include/bpf" ]; then
	apt-get "${apt_opts[@]}" update -q >&2
	rm -rf "$cache/deb" && mkdir "$cache/deb"
	(cd "$cache/deb" && apt-get "${apt_opts[@]}" download -q libbpf-dev) >&2
	dpkg -x "$cache"/deb/libbpf-dev_*.deb "$cache/root"
fi
found=$(echo '#include <bpf/bpf_helpers.h>' | C_INCLUDE_PATH=$cache/root/usr/include clang-19 -target bpf -E -H -x c - 2>&1 >/dev/null | sed -n 1p)
case $found in
*"$cache/"*) ;;
*) echo "check.sh: clang-19 does not find $suite's bpf_helpers.h first: $found" >&2; exit 1 ;;
esac
version=$(dpkg -f "$cache"/deb/libbpf-dev_*.deb Version)
echo "libbpf-dev $version ($suite): regenerating the BPF objects"
C_INCLUDE_PATH=$cache/root/usr/include SYNTH_REQUIRE=1 \
	go test -count=1 -run '^TestGeneratedUpToDate$' ./bpf
