#!/bin/bash
# boot.sh [options] KERNELDIR -- CMD [ARG...]
#
# Boots a Debian kernel unpacked by kernel.sh (either of Debian's package
# layouts, see there) under QEMU and runs CMD in it as root, so that
# synth's tests can run on kernels other than the host's.
# The guest has no disk of its own: the host's whole root filesystem is
# shared read-only over 9p (virtio) and CMD runs chrooted into it, so the
# guest runs the host's perf, gcc, readelf, python3 and the test binaries
# built on the host, at the same paths as on the host. /tmp is a fresh ext4
# on a scratch disk, as on a host whose /tmp is on its root disk (synth
# caches no build ID of a tmpfs file, and the tests of its cache count on
# that); fresh, writable tmpfs are mounted over /var/tmp and /run, and fresh /proc, /sys,
# /dev, bpffs, debugfs, tracefs, securityfs and cgroup2 at the usual places.
# /root (HOME) is an overlay: the host's, read-only, under a fresh tmpfs
# for the writes, so that `go build` in the guest (cmd/synth's tests) finds
# the host's Go module cache, build cache and go env.
#
# Because the guest's /tmp is a fresh tmpfs, the host's /tmp is NOT visible
# in the guest: put the binaries to run (go test -c -o ...) and the -C
# directory anywhere else, e.g. under the repository or $VMTEST_CACHE/bin.
#
# The initramfs is built on the fly: busybox-static, the kernel's modules
# for 9p over virtio-pci, overlay, and fuse (which the tests need), with their
# dependencies from the modules' own depends= lists, decompressed on the
# host, and the /init below. The per-run command rides in a second cpio
# archive appended to it. QEMU uses KVM when /dev/kvm is there, else TCG
# (slow but works in VMs without nested virtualization); $VMTEST_ACCEL
# (kvm or tcg) decides instead.
#
# A guest of another architecture (VMTEST_ARCH=arm64: Debian's arm64
# kernels under qemu-system-aarch64 -M virt, TCG with -cpu
# max,pauth-impdef=on; console ttyAMA0) cannot run the host's root: -R
# gives it a root of its own instead (rootfs.sh builds one), shared the
# same way, whose bin/busybox (busybox-static of that architecture) is
# also the initramfs's; -b shares the host's directories it needs (the
# test binaries, the checkout) at the same paths.
#
# CMD's stdout and stderr come out on the serial console, which is our
# stdout (CRs stripped); its exit status is reported as a VMTEST_EXIT=<rc>
# line and becomes ours. 124: timeout; 125: the guest died without a status.
#
# Options:
#   -C DIR        working directory of CMD (default: the current directory)
#   -e NAME=VAL   set an environment variable for CMD (repeatable)
#   -m MODULE     load one more module of the kernel (repeatable)
#   -a ARGS       append to the kernel command line (e.g. -a loglevel=7)
#   -t SECONDS    kill QEMU after this long (default 1200)
#   -o FILE       also save the whole console log in FILE
#   -s            run an interactive shell in the chroot instead of CMD
#   -R DIR        the guest's root: the host's DIR instead of / (read-only)
#   -b DIR        also share the host's DIR, read-only, at the same path
#                 (repeatable; created in a -R root that lacks it)
# Environment: VMTEST_MEM (MiB, default 3072), VMTEST_SMP (default 2),
# VMTEST_ACCEL (kvm or tcg), VMTEST_ARCH (amd64, the default, or arm64:
# the kernel's and the -R root's architecture).
set -eu

usage() {
	echo "usage: $0 [-C DIR] [-e NAME=VAL]... [-m MODULE]... [-a KERNELARGS] [-t SECONDS] [-o LOG] [-s] [-R ROOTDIR] [-b DIR]... KERNELDIR [-- CMD [ARG...]]" >&2
	exit 2
}

# Shell-quote one word.
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

dir=$PWD envs=() mods=(virtio_pci 9pnet_virtio 9p overlay fuse virtio_blk ?crc32c_generic ext4) append= timeout=1200 log= shell=
root=/ shares=()
while getopts C:e:m:a:t:o:sR:b:h opt; do
	case $opt in
	C) dir=$(cd "$OPTARG" && pwd) ;;
	e) [[ $OPTARG =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage; envs+=("$OPTARG") ;;
	m) mods+=("$OPTARG") ;;
	a) append="$append $OPTARG" ;;
	t) timeout=$OPTARG ;;
	o) log=$OPTARG ;;
	s) shell=1 ;;
	R) root=$(cd "$OPTARG" && pwd) ;;
	b) shares+=("$(cd "$OPTARG" && pwd)") ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
kdir=$(cd "$1" && pwd)
shift
if [ -n "$shell" ]; then
	[ $# = 0 ] || { [ $# = 1 ] && [ "$1" = -- ]; } || usage
	set -- /bin/sh
else
	[ $# -ge 2 ] && [ "$1" = -- ] || usage
	shift
fi

case $dir/ in /tmp/* | /var/tmp/*) echo "$0: warning: $dir is hidden in the guest by a fresh tmpfs" >&2 ;; esac

arch=${VMTEST_ARCH:-amd64}
case $arch in amd64 | arm64) ;; *) echo "$0: VMTEST_ARCH=$arch: want amd64 or arm64" >&2; exit 2 ;; esac
native=
[ "$arch" != "$(dpkg --print-architecture)" ] || native=1
[ -n "$native" ] || [ "$root" != / ] || { echo "$0: an $arch guest cannot run the host's root: give it one with -R (rootfs.sh)" >&2; exit 2; }
# The initramfs's busybox: the host's, or the guest root's for another
# architecture.
busybox=/bin/busybox
[ -n "$native" ] || busybox=$root/bin/busybox
[ -x "$busybox" ] || { echo "$0: no $busybox (busybox-static)" >&2; exit 2; }
# The -b shares' mount points.
for s in "${shares[@]}"; do
	[ "$root" = / ] || mkdir -p "$root$s"
done

# kernel.sh unpacks both of Debian's layouts to boot/vmlinuz-VERSION; a
# split kernel (6.19 on) unpacked by hand has only the modules
# directory's vmlinuz (vmlinuz.unsigned from linux-binary-unsigned), and
# its modules.builtin comes from linux-base.
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* 2>/dev/null | head -n 1) || true
if [ -n "$vmlinuz" ]; then
	kver=${vmlinuz##*/vmlinuz-}
else
	vmlinuz=$(ls "$kdir"/usr/lib/modules/*/vmlinuz{,.unsigned} 2>/dev/null | head -n 1) || true
	[ -n "$vmlinuz" ] || { echo "$0: no vmlinuz in $kdir" >&2; exit 2; }
	kver=${vmlinuz%/vmlinuz*} kver=${kver##*/}
fi
moddir=$kdir/lib/modules/$kver
[ -d "$moddir" ] || moddir=$kdir/usr/lib/modules/$kver # merged /usr (Debian 13)
[ -f "$moddir/modules.builtin" ] || { echo "$0: no $moddir/modules.builtin (a split kernel: linux-base-$kver?)" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmtest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --- initramfs --------------------------------------------------------------

mkdir -p "$tmp"/root/{bin,dev,proc,sys,newroot,rw,lib/modules,vmtest}
cp "$busybox" "$tmp/root/bin/busybox"
i=0
for s in "${shares[@]}"; do
	echo "share$i $s"
	i=$((i + 1))
done >"$tmp/root/shares"

# Copy a module and, first, what it depends on (its depends= modinfo),
# adding each once to the load order. Built-in modules are skipped.
find "$moddir/kernel" -name '*.ko*' |
	awk -F/ '{ n = $NF; sub(/\.ko.*/, "", n); gsub(/-/, "_", n); print n, $0 }' >"$tmp/modules"
order=
addmod() { # NAME, or ?NAME: loaded if the kernel has it as a module
	local name=${1//-/_} file ko dep optional=
	[[ $name != '?'* ]] || { optional=1 name=${name#?}; }
	[[ " $order " != *" $name "* ]] || return 0
	file=$(awk -v n="$name" '$1 == n { print $2; exit }' "$tmp/modules")
	if [ -z "$file" ]; then
		sed 's/-/_/g' "$moddir/modules.builtin" | grep -qE "/$name\.ko\$" && return 0
		[ -z "$optional" ] || return 0
		echo "$0: kernel $kver has no module $name" >&2
		exit 1
	fi
	ko=$tmp/root/lib/modules/$name.ko
	case $file in
	*.xz) xz -dc "$file" ;;
	*.zst) zstd -qdc "$file" ;;
	*.gz) gzip -dc "$file" ;;
	*) cat "$file" ;;
	esac >"$ko"
	for dep in $(LC_ALL=C tr '\0' '\n' <"$ko" | LC_ALL=C sed -n 's/^depends=//p' | tr , ' '); do
		addmod "$dep"
	done
	order="$order $name"
}
for m in "${mods[@]}"; do addmod "$m"; done
echo $order >"$tmp/root/lib/modules/order"

cat >"$tmp/root/init" <<'EOF'
#!/bin/busybox sh
# vmtest guest init: mount the host's root (or -R's) over 9p, run the command chrooted.
export PATH=/bin
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
fail() {
	echo "vmtest: $*"
	dmesg | tail -n 20
	poweroff -f
}
mount -t sysfs sys /sys
for m in $(cat /lib/modules/order); do
	insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
done

r=/newroot
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000,cache=loose hostroot $r ||
	fail "cannot mount the host's root"
while read -r tag path; do
	mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000,cache=loose "$tag" "$r$path" ||
		fail "cannot mount the host's $path"
done </shares
mount -t proc proc $r/proc &&
mount -t sysfs sys $r/sys &&
mount -t devtmpfs dev $r/dev &&
mkdir -p $r/dev/pts $r/dev/shm &&
mount -t devpts -o ptmxmode=0666 devpts $r/dev/pts &&
mount -t tmpfs -o mode=1777 shm $r/dev/shm &&
mount -t ext4 /dev/vda $r/tmp && chmod 1777 $r/tmp &&
mount -t tmpfs -o mode=1777 vartmp $r/var/tmp &&
mount -t tmpfs -o mode=755 run $r/run &&
mount -t tmpfs rw /rw && mkdir /rw/root /rw/work &&
mount -t overlay -o lowerdir=$r/root,upperdir=/rw/root,workdir=/rw/work home $r/root &&
mount -t bpf bpf $r/sys/fs/bpf &&
mount -t debugfs debugfs $r/sys/kernel/debug &&
mount -t tracefs tracefs $r/sys/kernel/tracing &&
mount -t securityfs securityfs $r/sys/kernel/security &&
mount -t cgroup2 cgroup2 $r/sys/fs/cgroup ||
	fail "cannot set up the chroot"
hostname vmtest

. /vmtest/run # sets "$@" and $interactive
echo VMTEST_START
if [ -n "$interactive" ]; then
	setsid cttyhack "$@"
else
	"$@" </dev/null
fi
echo "VMTEST_EXIT=$?"
poweroff -f
EOF
chmod 755 "$tmp/root/init"

term=dumb
[ -z "$shell" ] || term=${TERM:-vt100}
# The command: env -i VARS chroot /newroot /bin/sh -c 'cd DIR && exec CMD'.
{
	printf 'interactive=%s\n' "$shell"
	printf 'set -- env -i'
	for e in PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root "TERM=$term" "${envs[@]}"; do
		printf ' %s' "$(q "$e")"
	done
	printf ' chroot /newroot /bin/sh -c %s vmtest' "$(q 'cd "$1" || exit 125; shift; exec "$@"')"
	for a in "$dir" "$@"; do printf ' %s' "$(q "$a")"; done
	echo
} >"$tmp/root/vmtest/run"

(cd "$tmp/root" && find . -path ./vmtest -prune -o -print | busybox cpio -o -H newc -R 0:0 2>/dev/null | gzip -1) >"$tmp/initrd"
(cd "$tmp/root" && find vmtest | busybox cpio -o -H newc -R 0:0 2>/dev/null | gzip -1) >>"$tmp/initrd"

# --- QEMU -------------------------------------------------------------------

# The guest's /tmp: sparse, so only what the tests write takes room.
truncate -s "${VMTEST_TMP:-16G}" "$tmp/scratch.img"
mkfs.ext4 -q -F -m 0 -E lazy_itable_init=1,lazy_journal_init=1 "$tmp/scratch.img"

# VMTEST_ACCEL=kvm or tcg; unset: KVM when /dev/kvm is there (run.sh
# first boots a guest to see whether KVM works: a nested /dev/kvm can
# exist and still fail, see there). A guest of another architecture
# than the host's runs under TCG alone.
# arm64: pauth-impdef=on has TCG use QEMU's own pointer-authentication
# hash instead of the architected QARMA, much faster.
# amd64: TCG runs the vCPUs in one host thread (thread=single). With a
# thread per vCPU, x86 guests oopsed now and then on an int3 in the
# syscall entry or exit path (6.18.15 and 7.3.4, in trace_syscall_enter
# and syscall_exit_work) while the tests attached or detached syscall
# tracepoints: the kernel patches a static branch with an int3 first
# and serializes every CPU before it removes it (text_poke_bp), and a
# vCPU in another thread still ran the int3 after that. One thread
# orders the write and every later fetch. arm64 patches its text under
# stop_machine, with every other CPU held, and keeps a thread per vCPU.
case $arch in
amd64) machine=(qemu-system-x86_64 -machine q35) tcg=tcg,thread=single tcgcpu=max console=ttyS0 ;;
arm64) machine=(qemu-system-aarch64 -machine virt) tcg=tcg tcgcpu=max,pauth-impdef=on console=ttyAMA0 ;;
esac
[ -n "$native" ] || [ -n "${VMTEST_ACCEL:-}" ] || VMTEST_ACCEL=tcg
case ${VMTEST_ACCEL:-} in
kvm) accel=(-accel kvm -cpu host) ;;
tcg) accel=(-accel "$tcg" -cpu "$tcgcpu") ;;
'') if [ -w /dev/kvm ] && [ -r /dev/kvm ]; then
	accel=(-accel kvm -cpu host)
else
	accel=(-accel "$tcg" -cpu "$tcgcpu")
fi ;;
*) echo "$0: VMTEST_ACCEL=$VMTEST_ACCEL: want kvm or tcg" >&2; exit 2 ;;
esac
[ "$arch/${accel[1]}" != arm64/kvm ] || machine[2]=virt,gic-version=host
# QEMU's option syntax doubles a comma in a value. An oops ends the
# guest at once (oops=panic, panic=-1, -no-reboot) and its test run with
# it: a kernel oopsed in the scheduler (seen under TCG on Debian's 7.3.4
# arm64, in perf_ctx_sched_task_cb) holds its locks, and the guest would
# hang until the timeout.
qemu=("${machine[@]}" "${accel[@]}" -m "${VMTEST_MEM:-3072}" -smp "${VMTEST_SMP:-2}"
	-nographic -no-reboot
	-kernel "$vmlinuz" -initrd "$tmp/initrd"
	-append "console=$console panic=-1 oops=panic quiet loglevel=1$append"
	-virtfs "local,path=${root//,/,,},mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-drive "file=$tmp/scratch.img,if=virtio,format=raw,cache=unsafe"
	-nic none)
i=0
for s in "${shares[@]}"; do
	qemu+=(-virtfs "local,path=${s//,/,,},mount_tag=share$i,security_model=none,readonly=on,multidevs=remap")
	i=$((i + 1))
done

if [ -n "$shell" ]; then # straight to the terminal
	timeout --foreground "$timeout" "${qemu[@]}"
	exit
fi

# Show CMD's output live, between the VMTEST_START and VMTEST_EXIT markers
# of /init (the firmware's and kernel's chatter stays in the log); the
# marker can end a last line that has no newline.
#
# A guest that has not reached /init's VMTEST_START within the boot
# deadline (VMTEST_BOOT_DEADLINE seconds, default 600) is stopped: it
# then dies before its tests, which run.sh boots again. Seen under TCG:
# SeaBIOS's "Booting from ROM..." and nothing more for 18 minutes.
set +e
: >"$tmp/console"
(
	waited=0
	until grep -q 'VMTEST_START$' "$tmp/console"; do
		if [ "$waited" -ge "${VMTEST_BOOT_DEADLINE:-600}" ]; then
			echo "$0: no VMTEST_START after ${waited}s: stopping the guest" >&2
			pkill -f -- "^${qemu[0]} .*-initrd $tmp/initrd"
			break
		fi
		sleep 2
		waited=$((waited + 2))
	done
) &
deadline=$!
{
	timeout --foreground -k 10 "$timeout" "${qemu[@]}" </dev/null
	echo $? >"$tmp/qemu-rc"
} | sed -u -n -e 's/\r$//' -e "w $tmp/console" -e '/VMTEST_START$/,/VMTEST_EXIT=[0-9]*$/{
	/VMTEST_START$/d
	/^VMTEST_EXIT=[0-9]*$/d
	s/VMTEST_EXIT=[0-9]*$//
	p
}'
kill "$deadline" 2>/dev/null
set -e
[ -z "$log" ] || cp "$tmp/console" "$log"

qrc=$(cat "$tmp/qemu-rc")
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	echo "$0: timeout after ${timeout}s" >&2
	exit 124
fi
rc=$(sed -n 's/^.*VMTEST_EXIT=\([0-9]\{1,3\}\)$/\1/p' "$tmp/console" | tail -n 1)
if [ -z "$rc" ]; then
	echo "$0: the guest died without an exit status (QEMU exit $qrc); console:" >&2
	tail -n 30 "$tmp/console" >&2
	exit 125
fi
exit "$rc"
