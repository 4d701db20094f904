package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/cmd/synth/internal/endsig"
	"github.com/synth-dev/synth/internal/testenv"
)

// signalRun is one command of the signal sweep.
type signalRun struct {
	name string
	args []string // synth's, after the binary; "OUT" is the output file
	// pipe runs perf record -o - into synth's stdin, in synth's process
	// group (a shell pipeline).
	pipe bool
	// ok says whether the signal synth died of and stderr are one of
	// the command's ends after sig: as perf record, synth dies of the
	// signal once its output is complete.
	ok func(code int, died syscall.Signal, stderr string, sig syscall.Signal) bool
	// noFile says whether an end leaves no output, rightly: nothing
	// began that a file could hold.
	noFile func(died syscall.Signal, stderr string, sig syscall.Signal) bool
}

var (
	recordedLine = "synth: recorded "
	dumpedLine   = "synth: method "
	injectedLine = "synth: inject: method "
	cutShortLine = "synth: interrupted; the output holds what was dumped so far\n"
)

// signalRuns are the commands that must finish their file whatever
// signals they get, and how each may end.
var signalRuns = []signalRun{
	{name: "record -a", args: []string{"record", "-a", "-o", "OUT"},
		// An interrupted recording is a finished one, as perf record's.
		ok: func(_ int, died syscall.Signal, stderr string, sig syscall.Signal) bool {
			return died == sig && strings.Contains(stderr, recordedLine)
		}},
	{name: "record -- sleep", args: []string{"record", "-o", "OUT", "--", "sleep", "5"},
		// The workload's signal, which comes first as in perf record:
		// synth's SIGTERM, or the signal sent to the group; or, never
		// run, the signal synth got.
		ok: func(_ int, died syscall.Signal, stderr string, sig syscall.Signal) bool {
			return (died == syscall.SIGTERM || died == sig) && strings.Contains(stderr, recordedLine)
		},
		// The signal to the group killed the workload in the first
		// moments of the re-executed synth, before its init caught
		// signals (SIGQUIT's goroutine dump is the workload's): there is
		// no task to record.
		noFile: func(died syscall.Signal, stderr string, sig syscall.Signal) bool {
			return died == sig && strings.Count(stderr, "synth: ") == 1 &&
				(strings.HasSuffix(stderr, "synth: open sampling event: every target task has exited\n") ||
					strings.HasSuffix(stderr, "synth: open side-band event: every target task has exited\n"))
		}},
	{name: "dump", args: []string{"dump", "-o", "OUT"},
		// The dump's summary, or, cut short, the one line that says so;
		// or a dump done before the signal came.
		ok: func(code int, died syscall.Signal, stderr string, sig syscall.Signal) bool {
			return died == sig && (strings.HasPrefix(stderr, dumpedLine) || stderr == cutShortLine) ||
				died == 0 && code == 0 && strings.HasPrefix(stderr, dumpedLine)
		}},
	{name: "perf record | inject", args: []string{"inject", "-o", "OUT"}, pipe: true,
		// perf's recording ends with the signal to the group; inject
		// writes what it had, with its summary, or with one line why
		// not all of it.
		ok: func(_ int, died syscall.Signal, stderr string, sig syscall.Signal) bool {
			return died == sig && (strings.Contains(stderr, injectedLine) ||
				strings.Count(stderr, "\n") == 1 && strings.HasPrefix(stderr, "synth: "))
		},
		// perf ended before its stream began: the output is not touched.
		// perf does not catch SIGHUP or SIGQUIT and dies of the group's
		// at once; its stream may end before synth's runtime has handed
		// synth the same signal, and synth then exits 1 with that line,
		// not by the signal.
		noFile: func(died syscall.Signal, stderr string, sig syscall.Signal) bool {
			return (died == sig || died == 0) && stderr == "synth: read perf's stream: perf's stream ended before it began\n"
		}},
}

// busyLoops starts n shell loops that keep the CPUs busy until the
// test ends: the signals' races are widest on a loaded host.
func busyLoops(t *testing.T, n int) {
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// Any number of SIGINT, SIGTERM, SIGHUP and SIGQUIT, at any moment, ends
// synth record, dump and inject with a file perf reads and the summary
// (or the one line of a dump cut short), and then synth dies of the
// signal (Signaled), as perf record re-raises it: two signals 1 ms apart, swept
// across the phases (loading, the dump, sampling, the drain and write),
// on a loaded host. Every other run sends the second signal to the
// process group, as timeout(1) does, and Ctrl-C.
//
// SYNTH_SIGNAL_RUNS=N runs N of them, cycling the sweep, to count how
// often a file is left unreadable.
func TestSignalsFinishTheFile(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	ms := []time.Duration{0, 5, 20, 50, 100, 300, 700}
	if testing.Short() {
		ms = []time.Duration{0, 20, 100, 700}
	}
	delays := make([]time.Duration, len(ms))
	for i, d := range ms {
		delays[i] = d * time.Millisecond
	}
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}
	runs := len(signalRuns) * len(delays)
	if n := os.Getenv("SYNTH_SIGNAL_RUNS"); n != "" {
		var err error
		if runs, err = strconv.Atoi(n); err != nil {
			t.Fatalf("SYNTH_SIGNAL_RUNS=%q: %v", n, err)
		}
	}
	busyLoops(t, 2)
	dir := t.TempDir()
	start := time.Now()
	failed, unreadable, early := 0, 0, 0
	for i := range runs {
		sr := signalRuns[i%len(signalRuns)]
		d := delays[(i/len(signalRuns))%len(delays)]
		sig := sigs[(i+i/len(signalRuns))%len(sigs)]
		group := i%2 == 1 || sr.pipe
		what := fmt.Sprintf("run %d: %s, %v then %v 1ms later to the %s, after %v", i, sr.name, sig, sig,
			map[bool]string{false: "process", true: "group"}[group], d)
		out := filepath.Join(dir, fmt.Sprintf("%d.data", i))
		bad, badFile := signalOnce(t, perf, sr, out, d, sig, group)
		if bad == beforeInit {
			early++
			badFile = true // no file where one was due
		}
		if bad != "" {
			failed++
			if badFile {
				unreadable++
			}
			t.Errorf("%s: %s", what, bad)
		}
		os.Remove(out)
		os.Remove(out + ".old")
	}
	t.Logf("%d runs in %v: %d failed, %d of them leaving no file or one perf cannot read; %d killed before synth's init caught the signals",
		runs, time.Since(start).Round(time.Millisecond), failed, unreadable, early)
}

// beforeInit is signalOnce's verdict on a synth that died of the signal
// with nothing written: the signal came before the first moments of the
// process, before its init caught the signals (as perf record dies of
// one sent before its main sets its handlers). Right only early on.
const beforeInit = "killed by the signal before it caught it, and wrote nothing"

// signalOnce runs sr, sends it sig twice, 1 ms apart, after d, and checks
// how it ended: what is wrong, and whether the file is.
func signalOnce(t *testing.T, perf string, sr signalRun, out string, d time.Duration, sig syscall.Signal, group bool) (string, bool) {
	t.Helper()
	args := slicesReplace(sr.args, "OUT", out)
	cmd := exec.Command(synthBin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var rec *exec.Cmd
	if sr.pipe {
		rec = exec.Command(perf, "record", "-a", "-k", "CLOCK_MONOTONIC", "--synth=no", "-T", "-o", "-")
		rec.Env = perfEnv(t)
		rec.Stderr = nil // perf's own messages are not synth's
		pr, err := rec.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = pr
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{readyW} // descriptor 3
	cmd.Env = append(os.Environ(), endsig.ReadyEnv+"=3")
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rec != nil {
		rec.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: cmd.Process.Pid}
		if err := rec.Start(); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The sweep starts once synth catches the signals: the moments
	// before its init runs are a gap perf has too (before its main sets
	// its handlers), and how long they last depends on the host's
	// speed, not on synth.
	ready.SetReadDeadline(time.Now().Add(10 * time.Second))
	ready.Read(make([]byte, 1))
	time.Sleep(d)
	syscall.Kill(cmd.Process.Pid, sig)
	time.Sleep(time.Millisecond)
	if group {
		syscall.Kill(-cmd.Process.Pid, sig)
	} else {
		syscall.Kill(cmd.Process.Pid, sig)
	}
	err = nil
	select {
	case err = <-done:
	case <-time.After(endBound):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		endPerf(rec)
		return fmt.Sprintf("did not end within %v; stderr %q", endBound, lastLines(stderr.String(), 4)), false
	}
	endPerf(rec)
	// The Go test's view of how it ended: the signal it died of (the
	// shell's 128+N), or its exit status.
	code, died := 0, syscall.Signal(0)
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			died = ws.Signal()
		}
	} else if err != nil {
		t.Fatal(err)
	}
	errs := stderr.String()
	_, statErr := os.Stat(out)
	switch noFile := os.IsNotExist(statErr); {
	case noFile && died == sig && errs == "",
		// The Go runtime's own end for SIGQUIT, before synth's init:
		// a goroutine dump and status 2.
		noFile && sig == syscall.SIGQUIT && code == 2 && strings.HasPrefix(errs, "SIGQUIT: quit\n"):
		return beforeInit, false
	case noFile && sr.noFile != nil && sr.noFile(died, errs, sig):
		return "", false
	}
	if bad := perfReads(t, perf, out); bad != "" {
		return fmt.Sprintf("%s, stderr %q; %s", ended(code, died), lastLines(errs, 4), bad), true
	}
	if !sr.ok(code, died, errs, sig) {
		return fmt.Sprintf("%s, stderr %q: not one of the command's ends", ended(code, died), lastLines(errs, 4)), false
	}
	return "", false
}

// perfReads says what is wrong with the perf.data at path for perf
// report, if anything.
func perfReads(t *testing.T, perf, path string) string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Sprintf("no file: %v", err)
	}
	cmd := exec.Command(perf, "report", "--stdio", "-i", path)
	cmd.Env = perfEnv(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("perf report of %d bytes: %v: %s", st.Size(), err, lastLines(stderr.String(), 3))
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "WARNING") || strings.Contains(l, "properly terminated") || strings.Contains(l, "corrupt") {
			return fmt.Sprintf("perf report of %d bytes warns: %s", st.Size(), lastLines(stderr.String(), 3))
		}
	}
	return ""
}

// endPerf waits for the perf record of a pipeline, which the signals to
// the group end, and kills it if they did not within a few seconds.
func endPerf(rec *exec.Cmd) {
	if rec == nil {
		return
	}
	t := time.AfterFunc(3*time.Second, func() { rec.Process.Kill() })
	rec.Wait()
	t.Stop()
}

// ended says how a command ended: died of a signal, or its status.
func ended(code int, died syscall.Signal) string {
	if died != 0 {
		return "died of " + unix.SignalName(died)
	}
	return fmt.Sprintf("exit %d", code)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

func slicesReplace(s []string, old, new string) []string {
	r := make([]string, len(s))
	for i, v := range s {
		r[i] = v
		if v == old {
			r[i] = new
		}
	}
	return r
}

// With -o - whose reader has gone, a command ends with status 1 and one
// line on stderr (SIGPIPE is ignored: the write's EPIPE is the error),
// however far it got.
func TestClosedPipeOneLine(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	for _, tc := range []struct {
		name  string
		args  []string
		stdin func() (*os.File, func())
	}{
		{"dump", []string{"dump", "-o", "-"}, nil},
		{"record -a", []string{"record", "-a", "-o", "-"}, nil},
		{"record -- sleep", []string{"record", "-o", "-", "--", "sleep", "1"}, nil},
		{"inject", []string{"inject", "-o", "-"}, func() (*os.File, func()) {
			rec := exec.Command(perf, "record", "-a", "-q", "-k", "CLOCK_MONOTONIC", "--synth=no", "-T", "-o", "-", "--", "sleep", "1")
			rec.Env = perfEnv(t)
			pr, err := rec.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := rec.Start(); err != nil {
				t.Fatal(err)
			}
			return pr.(*os.File), func() { endPerf(rec) }
		}},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close() // the reader has gone before the first write
		cmd := exec.Command(synthBin, tc.args...)
		cmd.Stdout = w
		if tc.stdin != nil {
			in, wait := tc.stdin()
			cmd.Stdin = in
			defer wait()
		}
		res := runCmd(t, cmd)
		w.Close()
		if res.code != exitError || strings.Count(res.stderr, "\n") != 1 ||
			!strings.HasPrefix(res.stderr, "synth: ") || !strings.Contains(res.stderr, "broken pipe") {
			t.Errorf("%s into a closed pipe: exit %d, stderr %q; want %d and one line saying so", tc.name, res.code, res.stderr, exitError)
		}
	}
}
