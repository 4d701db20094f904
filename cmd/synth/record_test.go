package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

// buildSpin compiles testdata/spin: a loop in the main binary and one in
// a shared library, with frame pointers for call chains.
func buildSpin(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("gcc")
	testenv.Need(t, err == nil, "gcc")
	dir := t.TempDir()
	src, _ := filepath.Abs("../../testdata/spin")
	for _, args := range [][]string{
		{"-O1", "-fno-omit-frame-pointer", "-fPIC", "-shared", "-o", "libspin.so", filepath.Join(src, "libspin.c")},
		{"-O1", "-fno-omit-frame-pointer", "-o", "spin", filepath.Join(src, "spin.c"), "-L.", "-lspin", "-Wl,-rpath,$ORIGIN"},
	} {
		cmd := exec.Command("gcc", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	return filepath.Join(dir, "spin")
}

// startSpin starts the workload, before any recording.
func startSpin(t *testing.T, bin string) int {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.SysProcAttr = dieWithTest()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(200 * time.Millisecond) // its mappings exist before recording
	return cmd.Process.Pid
}

// endBound is how long a recording may take to end after SIGINT: it
// stops its events first, so even one whose rings overflow ends in a
// bounded time. Generous: a loaded host may be slow to schedule it.
const endBound = 15 * time.Second

// interruptAfter runs cmd, sends it SIGINT after d (Ctrl-C), and
// returns how it ended: a death by a signal as a shell shows it (130
// for SIGINT).
func interruptAfter(t *testing.T, d time.Duration, cmd *exec.Cmd) result {
	t.Helper()
	return interruptWhen(t, cmd, func(<-chan struct{}) { time.Sleep(d) })
}

// interruptAfterCPU runs cmd and sends it SIGINT once process pid has
// used ticks more clock ticks of CPU time, or cmd has ended: a recording
// of pid then holds about as many samples on a loaded host as on an
// idle one, where a time of the wall clock gave a tenth of them.
func interruptAfterCPU(t *testing.T, pid, ticks int, cmd *exec.Cmd) result {
	t.Helper()
	return interruptWhen(t, cmd, func(ended <-chan struct{}) {
		base := testproc.CPUTicks(pid)
		bound := time.After(3 * time.Minute)
		for testproc.CPUTicks(pid)-base < ticks {
			select {
			case <-ended:
				return
			case <-bound:
				t.Fatalf("process %d did not use %d ticks of CPU time within 3 minutes", pid, ticks)
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
}

// interruptWhen runs cmd, sends it SIGINT (Ctrl-C) once wait returns,
// and returns how cmd ended: a death by a signal as a shell shows it
// (130 for SIGINT). wait is given a channel closed once cmd has ended.
func interruptWhen(t *testing.T, cmd *exec.Cmd, wait func(ended <-chan struct{})) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // if wait failed the test
	done, ended := make(chan error, 1), make(chan struct{})
	go func() { done <- cmd.Wait(); close(ended) }()
	wait(ended)
	cmd.Process.Signal(os.Interrupt)
	var err error
	select {
	case err = <-done:
	case <-time.After(endBound):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not end within %v of SIGINT", cmd, endBound)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			r.code = 128 + int(ws.Signal()) // as a shell shows it
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

var reportLineRE = regexp.MustCompile(`^\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(\S+)`)

// report is perf report --sort dso,sym: the share of each "dso sym".
func report(t *testing.T, perf string, args ...string) map[string]float64 {
	t.Helper()
	cmd := exec.Command(perf, append([]string{"report", "--stdio", "--sort", "dso,sym"}, args...)...)
	cmd.Env = perfEnv(t)
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("%s: exit %d: %s", cmd, r.code, r.stderr)
	}
	shares := map[string]float64{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if m := reportLineRE.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			shares[m[2]+" "+m[4]] += v
		}
	}
	if len(shares) == 0 {
		t.Fatalf("%s: no samples:\n%s%s", cmd, r.stdout, r.stderr)
	}
	return shares
}

// major is the entries of a report with at least 5% of the samples.
func major(shares map[string]float64) map[string]float64 {
	m := map[string]float64{}
	for k, v := range shares {
		if v >= 5 {
			m[k] = v
		}
	}
	return m
}

// sameAttribution checks that two reports put the samples on the same
// DSOs and symbols, in shares within 10 points.
func sameAttribution(t *testing.T, what string, want, got map[string]float64) {
	t.Helper()
	w, g := major(want), major(got)
	for k, v := range w {
		if gv, ok := g[k]; !ok || gv-v > 10 || v-gv > 10 {
			t.Errorf("%s: %s has %.1f%%, want %.1f%%", what, k, gv, v)
		}
	}
	for k, v := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: %s has %.1f%%, not in the reference", what, k, v)
		}
	}
	unknown := 0.0
	for k, v := range got {
		if strings.HasPrefix(k, "[unknown] ") {
			unknown += v
		}
	}
	if unknown > 1 {
		t.Errorf("%s: %.2f%% of samples in [unknown]", what, unknown)
	}
}

var recordSummaryRE = regexp.MustCompile(`synth: recorded (\d+) samples?, (\d+) mappings synthesized, (\d+) live records; lost: (\d+) by the kernel, (\d+) of the dump; \S+\n`)

// checkRecordSummary checks the summary of a recording that SIGINT
// ended: it dies of the signal once its file is written, as perf
// record does.
func checkRecordSummary(t *testing.T, r result) {
	t.Helper()
	checkRecordExit(t, r, 128+int(syscall.SIGINT))
}

// checkRecordExit checks a recording's summary, and that it exited with
// code: its workload's status.
func checkRecordExit(t *testing.T, r result, code int) {
	t.Helper()
	m := recordSummaryRE.FindStringSubmatch(r.stderr)
	if r.code != code || m == nil || m[1] == "0" || m[5] != "0" {
		t.Fatalf("synth record: exit %d: %s", r.code, r.stderr)
	}
}

// synth record on a workload started before it attributes the samples
// as perf record does, ends cleanly on Ctrl-C, and perf inject accepts
// its output, file and pipe, and reports the same.
func TestRecordMatchesPerf(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	spinPid := startSpin(t, buildSpin(t))
	pid := strconv.Itoa(spinPid)
	const spinTicks = 150
	dir := t.TempDir()
	ref := filepath.Join(dir, "perf.data")
	cmd := exec.Command(perf, "record", "-F", "999", "-p", pid, "-o", ref)
	cmd.Env = perfEnv(t)
	// perf record dies of the SIGINT it re-raises: its report tells.
	// Each recording ends once the spinner used 1.5 s of CPU time
	// (1,500 samples at -F 999 once sampled): two shares of 150
	// samples, what 1.5 s of the wall clock gave at a load of 20, can
	// differ by 10 points by chance alone.
	interruptAfterCPU(t, spinPid, spinTicks, cmd)
	want := report(t, perf, "-i", ref)

	file := filepath.Join(dir, "synth.data")
	r := interruptAfterCPU(t, spinPid, spinTicks, exec.Command(synthBin, "record", "-F", "999", "-p", pid, "-o", file))
	checkRecordSummary(t, r)
	got := report(t, perf, "-i", file)
	sameAttribution(t, "synth record", want, got)

	injected := filepath.Join(dir, "injected.data")
	inject := exec.Command(perf, "inject", "-i", file, "-o", injected)
	inject.Env = perfEnv(t)
	if ir := runCmd(t, inject); ir.code != 0 {
		t.Fatalf("perf inject (file): exit %d: %s", ir.code, ir.stderr)
	}
	sameAttribution(t, "perf inject (file)", got, report(t, perf, "-i", injected))

	pipe := filepath.Join(dir, "pipe.data")
	out, err := os.Create(pipe)
	if err != nil {
		t.Fatal(err)
	}
	rec := exec.Command(synthBin, "record", "-F", "999", "-p", pid, "-o", "-")
	rec.Stdout = out
	pr := interruptAfterCPU(t, spinPid, spinTicks, rec)
	out.Close()
	checkRecordSummary(t, pr)
	in, err := os.Open(pipe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	injected = filepath.Join(dir, "injected-pipe.data")
	inject = exec.Command(perf, "inject", "-i", "-", "-o", injected)
	inject.Stdin, inject.Env = in, perfEnv(t)
	if ir := runCmd(t, inject); ir.code != 0 {
		t.Fatalf("perf inject (pipe): exit %d: %s", ir.code, ir.stderr)
	}
	sameAttribution(t, "perf inject (pipe)", want, report(t, perf, "-i", injected))
}

// synth record -- CMD follows the command and its children from before
// exec to their exit, ends when the command does, and records call
// chains with -g.
func TestRecordCommand(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	spin := buildSpin(t)
	file := filepath.Join(t.TempDir(), "cmd.data")
	// timeout forks spin and kills it after a second: the samples are
	// the child's.
	r := runCmd(t, exec.Command(synthBin, "record", "-F", "999", "-g", "-o", file, "--", "timeout", "1", spin))
	checkRecordExit(t, r, 124) // timeout's status when it had to kill its command
	got := report(t, perf, "-i", file, "--no-children")
	// How much of the second exec, the loader and the kernel take
	// before the loops start depends on the host's speed (in a TCG
	// guest, two thirds of it); what does not is that the loops have
	// nearly all the samples of spin's own code, and each a share.
	own, loops := 0.0, got["spin main_spin"]+got["libspin.so lib_spin"]
	for k, v := range got {
		if strings.HasPrefix(k, "spin ") || strings.HasPrefix(k, "libspin.so ") {
			own += v
		}
	}
	if got["spin main_spin"] < 5 || got["libspin.so lib_spin"] < 5 || loops < 0.9*own {
		t.Errorf("samples not on the workload's loops (%.2f%% of spin's own %.2f%%): %v", loops, own, got)
	}
	script := exec.Command(perf, "script", "-i", file)
	script.Env = perfEnv(t)
	sr := runCmd(t, script)
	noWarnings(t, "perf script", sr)
	lines := strings.Split(sr.stdout, "\n")
	chains := 0
	for i := 0; i+1 < len(lines); i++ {
		if strings.Contains(lines[i], " lib_spin+") && strings.Contains(lines[i+1], " main+") {
			chains++
		}
	}
	if chains == 0 {
		t.Errorf("no call chain lib_spin <- main in perf script:\n%.2000s", sr.stdout)
	}
}
