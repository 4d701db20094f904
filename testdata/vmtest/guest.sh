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
# every test below; or "short": the dump against /proc only, for CI.
# The tests run with SYNTH_REQUIRE=1: a test skips only where the kernel
# lacks a feature that came later (it says which) or a build option.
# Exit status: 0 when nothing failed.
set -u
bin=$1
suite=${2:-full}
root=$(pwd)
export SYNTH_REQUIRE=1 SYNTH_BIN="$bin/synth"

# What auto picks here, as a user sees it: the summary line names the
# method and the walk, a line before it why a better method did not load;
# -v adds where the time went, loading included.
out=$("$bin/synth" dump -v --no-buildid -o /dev/null 2>&1)
echo "$out" | sed 's/^/vmtest: synth dump: /'
chose=$(echo "$out" | sed -n 's/^synth: method \([a-z]*\)\( (walk \([a-z]*\))\)\{0,1\}:.*/\1 (walk \3)/p' | sed 's/ (walk )$//')

# package directory, test binary, tests (anchored regexp)
case $suite in
short)
	tests="
synth synth.test ^(TestDumpMatchesProc|TestKernelFallbacks)$
"
	;;
*)
	tests="
internal/bpfiter bpfiter.test .
internal/bpfprog bpfprog.test .
internal/method/bpfmethod bpfmethod.test .
synth synth.test ^(TestDumpMatchesProc|TestDumpHostMatchesProc|TestDumpGoneProcess|TestWalksAgree|TestWalkFallback|TestWalkChunks|TestWalkFaults|TestWalkMaxPath|TestIterLockedProcess|TestWalkUnderProcessChurn|TestBuildIDsReadDuringWalk|TestKernelFallbacks|TestKernelFallbackLoadsLate|TestMethodsAgree|TestMethodTables|TestBuildIDHostReadelf|TestBuildIDCrafted|TestBuildIDHiddenFiles|TestSessionLiveMmap|TestTableLive)$
cmd/synth cmd.test ^(TestDumpFilePerf|TestDumpPipePerf|TestBuildIDsPerf|TestMethodsPerf|TestAutoFallback|TestNoVsyscallFor32Bit|TestInjectPid|TestRecordCommand|TestDumpUnderChurn|TestBPFEventsMatchPerf|TestDumpLockedProcess)$
"
	;;
esac

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
passed=$(grep -c '^--- PASS' "$log")
failed=$(grep -c '^--- FAIL' "$log")
skipped=$(grep -c '^--- SKIP' "$log")
# A binary that died (panic, timeout) leaves no --- FAIL line of its own.
if grep -q '^panic: \|^FAIL$' "$log" && [ "$failed" = 0 ]; then
	failed=1
fi
rm -f "$log"
echo "vmtest: $(uname -r): auto chose ${chose:-nothing}; $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
