#!/bin/sh
# guest.sh BINDIR [SUITE]
#
# Runs synth's kernel-dependent tests on the running kernel, from the test
# binaries and the synth command that run.sh built into BINDIR, and ends
# with one line:
#
#   vmtest: KERNEL: auto chose METHOD (walk WALK); N passed, N failed, N skipped
#
# It runs inside a guest booted by boot.sh (or on the host, for the host's
# own kernel), from the root of the checkout. SUITE is "full" (default):
# every test below; or "short", for CI: the dump against /proc, every
# program through the verifier, and the unmaps a Table learns of between
# dumps. On a
# kernel without the BPF method (expect, below) either is the "proc"
# suite: the dump through auto against /proc, and --method bpf refused.
# The tests run with SYNTH_REQUIRE=1: a test skips only where the kernel
# lacks a feature that came later (it says which) or a build option.
# What auto chose must be what this kernel must give (expect): anything
# else, less or more, counts as a failed test.
# Exit status: 0 when nothing failed.
set -u
bin=$1
suite=${2:-full}
root=$(pwd)
export SYNTH_REQUIRE=1 SYNTH_BIN="$bin/synth"

# expect RELEASE prints what auto must choose on a kernel of that
# release: "procmaps" before iter/task_vma (5.12); "bpf (walk maple)"
# where the kernel has the seqcount_t mm_lock_seq (6.14, and Debian's
# 6.12) and the open-coded task_vma iterator's mm fix (CVE-2026-53085:
# 6.12.91, 6.18.33, 7.0.10, 7.1; see internal/method/bpfmethod's
# kfuncfix.go); "bpf (walk iter)" elsewhere. VMTEST_EXPECT overrides it,
# for a kernel this rule does not know (a vendor's backports).
expect() {
	if [ -n "${VMTEST_EXPECT:-}" ]; then
		echo "$VMTEST_EXPECT"
		return
	fi
	set -- $(echo "$1" | sed 's/[^0-9.].*//; s/\./ /g') 0 0
	v=$(($1 * 1000000 + $2 * 1000 + $3))
	if [ $v -lt 5012000 ]; then
		echo procmaps
	elif [ $v -ge 7001000 ] || { [ $v -ge 7000010 ] && [ $v -lt 7001000 ]; } ||
		{ [ $v -ge 6018033 ] && [ $v -lt 6019000 ]; } ||
		{ [ $v -ge 6012091 ] && [ $v -lt 6013000 ]; }; then
		echo "bpf (walk maple)"
	else
		echo "bpf (walk iter)"
	fi
}
want=$(expect "$(uname -r)")
[ "$want" != procmaps ] || suite=proc

# What auto picks here, as a user sees it: the summary line names the
# method and the walk, a line before it why a better method did not load;
# -v adds where the time went, loading included, and the verifier's last
# lines of a program it refused.
out=$("$bin/synth" dump -v --no-buildid -o /dev/null 2>&1)
echo "$out" | sed 's/^/vmtest: synth dump: /'
chose=$(echo "$out" | sed -n 's/^synth: method \([a-z]*\)\( (walk \([a-z]*\))\)\{0,1\}:.*/\1 (walk \3)/p' | sed 's/ (walk )$//')

# package directory, test binary, tests (anchored regexp)
case $suite in
short)
	tests="
internal/method/bpfmethod bpfmethod.test ^(TestProgramsVerify|TestUnmapStaleNote|TestKernelCache)$
cmd/synth/internal/bench/floor floor.test ^(TestFloors)$
synth synth.test ^(TestDumpMatchesProc|TestAutoMatchesProc|TestKernelFallbacks|TestTableUnmapsLive|TestThreadsBelowLeader|TestZombieLeader)$
"
	;;
proc)
	tests="
synth synth.test ^(TestAutoMatchesProc|TestMethodsPerf|TestThreadsBelowLeader|TestZombieLeader)$
cmd/synth cmd.test ^(TestAutoFallback)$
"
	;;
*)
	tests="
internal/bpfiter bpfiter.test .
internal/bpfprog bpfprog.test .
internal/kernelbug kernelbug.test .
internal/method/bpfmethod bpfmethod.test .
cmd/synth/internal/bench/floor floor.test .
synth synth.test ^(TestDumpMatchesProc|TestAutoMatchesProc|TestDumpHostMatchesProc|TestDumpGoneProcess|TestWalksAgree|TestWalkChunks|TestWalkMaxPath|TestIterLockedProcess|TestWalkUnderProcessChurn|TestBuildIDsReadDuringWalk|TestKernelFallbacks|TestMethodsAgree|TestMethodTables|TestBuildIDHostReadelf|TestBuildIDCrafted|TestBuildIDHiddenFiles|TestSessionLiveMmap|TestTableLive|TestPageOffsets|TestTableForgetsUnmapped|TestTableForgetsExited|TestTableDlclose|TestTableUnmapsLive|TestBPFEventsMatchPerf|TestBuildIDsPerf|TestMethodsPerf|TestNoVsyscallFor32Bit|TestThreadsBelowLeader|TestZombieLeader|TestSessionThreadsBelowLeader)$
cmd/synth cmd.test ^(TestDumpFilePerf|TestDumpPipePerf|TestDumpBuildIDLine|TestAutoFallback|TestInjectPid|TestRecordCommand|TestDumpUnderChurn|TestDumpLockedProcess|TestVerifierReason|TestPidNamespace|TestContainerRoot|TestUserNamespace|TestForeignProc|TestRecordThreadsBelowLeader)$
"
	;;
esac
# arm64 (make vmtest-arm64, over rootfs.sh's Debian arm64 userland: perf,
# readelf, gcc, python3-fusepy, util-linux all there; no Go, hence
# SYNTH_BIN): the same tests, with two changes.
# - TestPageOffsets joins synth's: the mappings' file offsets, which
#   16K pages (Debian's arm64-16k kernel) put to the test.
# - TestNoVsyscallFor32Bit is left out: it runs an i386 executable next to
#   a 64-bit one and looks for x86-64's [vsyscall]; arm64 runs no i386
#   code and has no vsyscall page.
if [ "$(uname -m)" = aarch64 ]; then
	case $suite in
	short)
		tests="
internal/method/bpfmethod bpfmethod.test ^(TestProgramsVerify|TestUnmapStaleNote|TestKernelCache)$
cmd/synth/internal/bench/floor floor.test ^(TestFloors)$
synth synth.test ^(TestDumpMatchesProc|TestAutoMatchesProc|TestKernelFallbacks|TestPageOffsets|TestTableUnmapsLive|TestThreadsBelowLeader|TestZombieLeader)$
"
		;;
	full)
		tests="
internal/bpfiter bpfiter.test .
internal/bpfprog bpfprog.test .
internal/kernelbug kernelbug.test .
internal/method/bpfmethod bpfmethod.test .
cmd/synth/internal/bench/floor floor.test .
synth synth.test ^(TestDumpMatchesProc|TestAutoMatchesProc|TestDumpHostMatchesProc|TestDumpGoneProcess|TestWalksAgree|TestWalkChunks|TestWalkMaxPath|TestIterLockedProcess|TestWalkUnderProcessChurn|TestBuildIDsReadDuringWalk|TestKernelFallbacks|TestMethodsAgree|TestMethodTables|TestBuildIDHostReadelf|TestBuildIDCrafted|TestBuildIDHiddenFiles|TestSessionLiveMmap|TestTableLive|TestPageOffsets|TestTableForgetsUnmapped|TestTableForgetsExited|TestTableDlclose|TestTableUnmapsLive|TestBPFEventsMatchPerf|TestBuildIDsPerf|TestMethodsPerf|TestThreadsBelowLeader|TestZombieLeader|TestSessionThreadsBelowLeader)$
cmd/synth cmd.test ^(TestDumpFilePerf|TestDumpPipePerf|TestDumpBuildIDLine|TestAutoFallback|TestInjectPid|TestRecordCommand|TestDumpUnderChurn|TestDumpLockedProcess|TestVerifierReason|TestPidNamespace|TestContainerRoot|TestUserNamespace|TestForeignProc|TestRecordThreadsBelowLeader)$
"
		;;
	esac
	# The first python3 reads its modules over 9p, under TCG: 5 s were
	# seen for `import ctypes.util` alone (0.4 s once read), as long as
	# the tests give their FUSE server (testproc.HungFUSE) to come up.
	# Read them once before.
	[ "$suite" != full ] || /usr/bin/python3 -c 'import fusepy' >/dev/null 2>&1 || true
fi

log=$(mktemp) one=$(mktemp)
echo "$tests" | while read -r dir test run; do
	[ -n "$dir" ] || continue
	echo "vmtest: $dir: $run"
	(cd "$root/$dir" && "$bin/$test" -test.count=1 -test.v -test.timeout=15m -test.run "$run") >"$one" 2>&1
	cat "$one" >>"$log"
	# The verdicts, and the whole output of each test that failed.
	grep -E '^--- (PASS|SKIP)' "$one"
	awk '/^--- FAIL: /{ failed[$3] = 1 } { line[NR] = $0 }
	END {
		for (i = 1; i <= NR; i++) {
			if (line[i] ~ /^=== (RUN|CONT|PAUSE|NAME) /) { split(line[i], f, " "); split(f[3], n, "/"); cur = n[1] }
			if (cur in failed || line[i] ~ /^(panic|FAIL$|fatal error)/) print line[i]
		}
	}' "$one"
done
rm -f "$one"

# Where the kernel has no BPF method, --method bpf fails, exit status 1,
# with one line that names the program and why.
if [ $suite = proc ]; then
	echo "vmtest: synth dump --method bpf"
	out=$("$bin/synth" dump --method bpf --no-buildid -o /dev/null 2>&1)
	rc=$?
	echo "$out" | sed 's/^/vmtest: synth dump --method bpf: /'
	if [ $rc = 1 ] && echo "$out" | grep -q '^synth: .*load BPF program [a-z_]*: .'; then
		echo "--- PASS: VmtestMethodBPFRefused" | tee -a "$log"
	else
		echo "--- FAIL: VmtestMethodBPFRefused (exit $rc, want 1 and the program's load error)" | tee -a "$log"
	fi
fi

# auto must choose what this kernel must give.
if [ "$chose" = "$want" ]; then
	echo "--- PASS: VmtestAutoChoice ($chose)" >>"$log"
else
	echo "vmtest: auto chose ${chose:-nothing}, but $(uname -r) must give $want"
	echo "--- FAIL: VmtestAutoChoice" >>"$log"
fi
passed=$(grep -c '^--- PASS' "$log")
failed=$(grep -c '^--- FAIL' "$log")
skipped=$(grep -c '^--- SKIP' "$log")
# A binary that died (panic, timeout) leaves no --- FAIL line of its own.
if grep -q '^panic: \|^FAIL$' "$log" && [ "$failed" = 0 ]; then
	failed=1
fi
rm -f "$log"
echo "vmtest: $(uname -r): auto chose ${chose:-nothing}, must give $want; $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
