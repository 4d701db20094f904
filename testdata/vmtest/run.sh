#!/bin/bash
# run.sh [KERNEL...]   (make vmtest)
#
# Runs synth's kernel-dependent tests on each kernel of the matrix: Debian
# kernels booted under QEMU (boot.sh; KVM when a first guest runs under
# it, TCG otherwise; VMTEST_ACCEL=kvm or tcg decides instead), and the host's own kernel, which no package holds, run
# directly. A KERNEL is a Debian series (5.10: Debian 11's, from
# bullseye-security; 6.1, 6.12: Debian 12's; 6.18 or any other:
# trixie-backports'), "newest": the newest kernel Debian ships, resolved
# now from trixie-backports, forky and sid (kernel.sh --newest-debian), so
# that the matrix moves on with Debian; or "host". Default: 5.10 6.1 6.12
# 6.18 newest host, or $VMTEST_KERNELS. $VMTEST_SUITE=short runs only the
# dump against /proc (CI's guests); $VMTEST_BENCH=1 also runs
# synth bench --sweep 100k --reps 3 --no-perf in each.
#
# It installs what it needs (QEMU, busybox-static, xz, zstd), builds the
# synth command and the test binaries on the host, and prints one line per
# kernel: its release, the method and walk auto chose and what that
# kernel must give (guest.sh), tests passed/failed. It exits 1 if any
# kernel failed.
#
# VMTEST_ARCH=arm64 (make vmtest-arm64) runs the same on Debian's arm64
# kernels, under qemu-system-aarch64 (TCG, as the host is x86-64): a
# KERNEL is 6.1 or 6.12 (Debian 12's, from bookworm-security), "newest"
# (the newest arm64 kernel Debian ships) or another series (from
# trixie-backports); KERNEL-16k is that series' arm64-16k flavour, 16K
# pages. Default: 6.1 6.12 newest 6.12-16k. The test binaries and synth
# are cross-built (CGO_ENABLED=0 GOARCH=arm64) into
# $VMTEST_CACHE/arm64/run/bin, the checkout copied to
# $VMTEST_CACHE/arm64/run/src, which the guest sees at the same path
# (boot.sh -b), over a Debian 12 arm64 userland that rootfs.sh builds
# once into $VMTEST_CACHE/arm64/rootfs (boot.sh -R).
set -eu
cd "$(dirname "$0")/../.."
here=testdata/vmtest
cache=${VMTEST_CACHE:-/var/cache/synth-vmtest}
suite=${VMTEST_SUITE:-full}
arch=${VMTEST_ARCH:-amd64}
case $arch in
amd64) defaults="5.10 6.1 6.12 6.18 newest host" ;;
arm64) defaults="6.1 6.12 newest 6.12-16k" ;;
*) echo "$0: VMTEST_ARCH=$arch: want amd64 or arm64" >&2; exit 2 ;;
esac
if [ $# -gt 0 ]; then kernels=$*; else kernels=${VMTEST_KERNELS:-$defaults}; fi
native=
[ "$arch" != "$(dpkg --print-architecture)" ] || native=1

need=
case $arch in
amd64) command -v qemu-system-x86_64 >/dev/null || need="$need qemu-system-x86" ;;
arm64) command -v qemu-system-aarch64 >/dev/null || need="$need qemu-system-arm" ;;
esac
[ -x /bin/busybox ] || need="$need busybox-static"
command -v xz >/dev/null || need="$need xz-utils"
command -v zstd >/dev/null || need="$need zstd"
if [ -n "$need" ]; then
	echo "vmtest: installing$need"
	apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >/dev/null
fi

# The binaries live outside /tmp, which the guest replaces with a tmpfs.
# Another architecture's go in $cache/ARCH/run, which its guest sees
# (boot.sh -b) over its own root (rootfs.sh, boot.sh -R).
boot=()
if [ -n "$native" ]; then
	bin=$cache/bin src=$cache/src
else
	# One run at a time per cache: another checkout's run (CI's) would
	# replace the root, binaries and checkout under this one's guest
	# (rootfs.sh rebuilds a root whose package list differs).
	mkdir -p "$cache/$arch"
	exec 9>"$cache/$arch/lock"
	if ! flock -n 9; then
		echo "vmtest: another $arch run uses $cache/$arch: waiting for it"
		flock 9
	fi
	rootfs=$($here/rootfs.sh "$arch")
	run=$cache/$arch/run
	bin=$run/bin src=$run/src
	boot=(-R "$rootfs" -b "$run")
	export CGO_ENABLED=0 GOARCH=$arch
fi
mkdir -p "$bin"
echo "vmtest: building into $bin"
go build -o "$bin/synth" ./cmd/synth
go test -c -o "$bin/synth.test" ./synth
go test -c -o "$bin/cmd.test" ./cmd/synth
go test -c -o "$bin/bpfmethod.test" ./internal/method/bpfmethod
go test -c -o "$bin/bpfiter.test" ./internal/bpfiter
go test -c -o "$bin/floor.test" ./cmd/synth/internal/bench/floor
go test -c -o "$bin/bpfprog.test" ./internal/bpfprog
go test -c -o "$bin/kernelbug.test" ./internal/kernelbug

# The tests run in a copy of the checkout outside /tmp and /var/tmp,
# which the guest replaces (CI's clone may be there): the guest sees the
# host's root at the same paths.
rm -rf "$src" && mkdir -p "$src"
tar --exclude=./.git --exclude=./bin -cf - . | tar -xf - -C "$src"

# guest runs the tests (and the benchmark) in the current kernel.
guest="$src/$here/guest.sh $bin $suite"
if [ "${VMTEST_BENCH:-}" = 1 ]; then
	guest="$guest; $bin/synth bench --sweep 100k --reps 3 --no-perf --svg /tmp/bench.svg"
fi

# accel KERNELDIR prints kvm if a guest of that kernel boots and runs a
# command under KVM, else tcg. /dev/kvm alone proves nothing: in a VM
# with nested virtualization it can be there and fail, QEMU aborting at
# once ("failed to set MSR 0x10a", IA32_ARCH_CAPABILITIES, with -cpu
# host) or the guest spinning in its first instructions (with that MSR
# left out). A guest that works boots in seconds under KVM.
accel() {
	if [ -r /dev/kvm ] && [ -w /dev/kvm ] &&
		VMTEST_ACCEL=kvm $here/boot.sh -t 60 "$1" -- true >/dev/null 2>&1; then
		echo kvm
	else
		[ ! -e /dev/kvm ] || echo "vmtest: /dev/kvm is there but a guest does not run under KVM: TCG" >&2
		echo tcg
	fi
}

results=() failed=0
export VMTEST_ARCH=$arch
for k in $kernels; do
	start=$(date +%s)
	out=$(mktemp)
	# KERNEL-16k: the arm64-16k flavour.
	name=$k flavour=$arch
	case $k in *-16k) flavour=$arch-16k k=${k%-16k} ;; esac
	export VMTEST_FLAVOUR=$flavour
	if [ "$k" = host ] && [ -z "$native" ]; then
		results+=("vmtest: host: the host's kernel is not $arch")
		failed=1
		rm -f "$out"
		continue
	elif [ "$k" = host ]; then
		echo "vmtest: the host's kernel $(uname -r), not booted"
		(cd "$src" && sh -c "$guest") 2>&1 | tee "$out" || true
	else
		case $k in
		newest)
			if ! newest=$($here/kernel.sh --newest-debian); then
				results+=("vmtest: $name: cannot resolve Debian's newest kernel")
				failed=1
				rm -f "$out"
				continue
			fi
			read -r suite pkg <<<"$newest"
			echo "vmtest: the newest kernel Debian ships: $pkg ($suite)"
			;;
		*)
			suite= # Debian 12's kernels come from the host's sources
			case $k in 5.10) suite=bullseye-security ;; 6.1 | 6.12) ;; *) suite=trixie-backports ;; esac
			# (another architecture's from bookworm-security: the host's apt has none)
			[ -n "$native" ] || [ -n "$suite" ] || suite=bookworm-security
			pkg=$(VMTEST_APT_SUITE=$suite $here/kernel.sh --newest "$k")
			;;
		esac
		dir=$(VMTEST_APT_SUITE=$suite $here/kernel.sh "$pkg" "$cache")
		[ -n "${VMTEST_ACCEL:-}" ] || [ -z "$native" ] || VMTEST_ACCEL=$(accel "$dir")
		[ -n "${VMTEST_ACCEL:-}" ] || VMTEST_ACCEL=tcg # another architecture's
		export VMTEST_ACCEL
		# Under TCG a guest now and then panics while it boots (seen on
		# 6.12 and 7.3: an oops in sched_clock_cpu before init), or
		# hangs (boot.sh stops one that has not started its tests within
		# VMTEST_BOOT_DEADLINE): one that dies before the tests began is
		# booted again, up to $VMTEST_BOOTS times in all.
		boots=${VMTEST_BOOTS:-3}
		for try in $(seq "$boots"); do
			echo "vmtest: booting $pkg ($VMTEST_ACCEL)"
			$here/boot.sh -t "${VMTEST_TIMEOUT:-2400}" ${boot[@]+"${boot[@]}"} -C "$src" "$dir" -- sh -c "$guest" 2>&1 | tee "$out" || true
			grep -q '^vmtest: synth dump: ' "$out" && break
			[ "$try" = "$boots" ] || echo "vmtest: $pkg died before the tests began; booting it again"
		done
	fi
	line=$(grep '^vmtest: [^ ]*: auto chose' "$out" | tail -n 1)
	[ -n "$line" ] || line="vmtest: $name: no result (the guest did not finish)"
	case $line in *" 0 failed"*) ;; *) failed=1 ;; esac
	results+=("$line ($(($(date +%s) - start)) s)")
	rm -f "$out"
done
echo
printf '%s\n' "${results[@]}"
exit $failed
