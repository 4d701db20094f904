package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

// injectPipe runs `perf record ARGS -o - | synth inject INJECT...`, its
// stdout to stdout if not nil, and returns synth inject's result.
func injectPipe(t *testing.T, perf string, recordArgs, injectArgs []string, stdout *os.File) result {
	t.Helper()
	rec := exec.Command(perf, append(append([]string{"record"}, recordArgs...), "-o", "-", "--", "sleep", "2")...)
	rec.Env = perfEnv(t)
	inj := exec.Command(synthBin, append([]string{"inject"}, injectArgs...)...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var perfErr bytes.Buffer
	rec.Stdout, rec.Stderr, inj.Stdin = pw, &perfErr, pr
	if stdout != nil {
		inj.Stdout = stdout
	}
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := runCmd(t, inj)
	pr.Close()
	if err := rec.Wait(); err != nil && r.code == 0 {
		t.Fatalf("perf record %v: %v\n%s", recordArgs, err, perfErr.String())
	}
	return r
}

// perfRecordRef records with perf's own synthesis, for comparison.
func perfRecordRef(t *testing.T, perf, file string, args ...string) {
	t.Helper()
	cmd := exec.Command(perf, append(append([]string{"record", "-q"}, args...), "-o", file, "--", "sleep", "2")...)
	cmd.Env = perfEnv(t)
	if r := runCmd(t, cmd); r.code != 0 {
		t.Errorf("perf record %v: exit %d: %s", args, r.code, r.stderr)
		return
	}
	// perf's file beside synth inject's loads (and the other perf): the
	// kernel's grown records, which perf cannot read, repaired.
	perftest.Ungrow(t, file)
}

// checkInjected checks a recording of the spin process: its samples on
// its binary and library, few unknown, close to perf's own synthesis;
// no mapping of it (or of the kernel) twice; perf script and perf inject
// read it without a word on stderr.
func checkInjected(t *testing.T, perf, file, ref string, pid int, filter ...string) {
	t.Helper()
	args := append([]string{"-i", file, "--no-children"}, filter...)
	got := report(t, perf, args...)
	want := report(t, perf, append([]string{"-i", ref, "--no-children"}, filter...)...)
	// Of the user-space samples: how much of the spin's time the kernel
	// takes differs between hosts (under emulation it is more).
	onSpin := got["spin main_spin"] + got["libspin.so lib_spin"]
	unknown, kernel := 0.0, 0.0
	for k, v := range got {
		if strings.Contains(k, "[unknown]") {
			unknown += v
		}
		if strings.HasPrefix(k, "[kernel.kallsyms] ") {
			kernel += v
		}
	}
	if user := 100 - kernel; user <= 0 || onSpin/user < 0.9 || unknown > 1 {
		t.Errorf("%s: %.2f%% on spin's binary and library, of %.2f%% in user space (want >= 90%% of it), %.2f%% unknown (want <= 1): %v",
			file, onSpin, user, unknown, major(got))
	}
	for _, k := range []string{"spin main_spin", "libspin.so lib_spin"} {
		if math.Abs(got[k]-want[k]) > 10 {
			t.Errorf("%s: %q %.2f%%, perf's own synthesis %.2f%%", file, k, got[k], want[k])
		}
	}
	for k, n := range mappingCounts(t, file, uint32(pid)) {
		if n > 1 {
			t.Errorf("%s: mapping %s written %d times", file, k, n)
		}
	}
	for _, args := range [][]string{{"script", "-i", file}, {"inject", "-i", file, "-o", file + ".injected"}} {
		cmd := exec.Command(perf, args...)
		cmd.Env = perfEnv(t)
		cmd.Stdout = new(bytes.Buffer)
		r := runCmd(t, cmd)
		if r.code != 0 || strings.TrimSpace(perfLossRE.ReplaceAllString(r.stderr, "")) != "" {
			t.Errorf("perf %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// perfLossRE is the warning perf prints for the LOST records of its own
// recording, which a loaded host makes: the file is sound all the same.
var perfLossRE = regexp.MustCompile(`Warning:\s*Processed \d+ (events and lost \d+ chunks!\s*Check IO/CPU overload!|samples and lost [\d.]+%\s*samples!)\s*`)

// mappingCounts counts the MMAP and MMAP2 records of pid and of the
// kernel, by pid, start, length, page offset and name.
func mappingCounts(t *testing.T, file string, pid uint32) map[string]int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := perfdata.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		var k string
		switch rec.Type {
		case perfdata.RecordMmap:
			m, _, err := perfdata.ParseMmap(rec.Data, 0)
			if err == nil && (m.Pid == pid || m.Pid == math.MaxUint32) {
				k = fmt.Sprintf("%d %#x+%#x@%#x %s", int32(m.Pid), m.Addr, m.Len, m.Pgoff, m.Filename)
			}
		case perfdata.RecordMmap2:
			m, _, err := perfdata.ParseMmap2(rec.Data, 0)
			if err == nil && m.Pid == pid {
				k = fmt.Sprintf("%d %#x+%#x@%#x %s", m.Pid, m.Addr, m.Len, m.Pgoff, m.Filename)
			}
		}
		if k != "" {
			counts[k]++
		}
	}
	if len(counts) < 3 {
		t.Errorf("%s: only %d mappings of pid %d and the kernel: %v", file, len(counts), pid, counts)
	}
	return counts
}

// A process started before recording: perf record -p without its own
// synthesis, through synth inject, reports it as perf record with its
// synthesis does.
func TestInjectPid(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	pid := startSpin(t, buildSpin(t))
	dir := t.TempDir()
	out, ref := filepath.Join(dir, "out.data"), filepath.Join(dir, "ref.data")
	p := strconv.Itoa(pid)
	var wg sync.WaitGroup
	wg.Go(func() { perfRecordRef(t, perf, ref, "-p", p, "-k", "CLOCK_MONOTONIC", "-F", "999", "-g") })
	r := injectPipe(t, perf, []string{"-p", p, "--synth=no", "-k", "CLOCK_MONOTONIC", "-F", "999", "-g"}, []string{"-o", out}, nil)
	wg.Wait()
	if r.code != 0 || !strings.Contains(r.stderr, "synth: inject: method bpf: 1 processes") {
		t.Fatalf("synth inject: exit %d: %s", r.code, r.stderr)
	}
	checkInjected(t, perf, out, ref, pid)
	// perf annotate finds the samples in the binary's code.
	cmd := exec.Command(perf, "annotate", "--stdio", "-i", out, "main_spin")
	cmd.Env = perfEnv(t)
	if r := runCmd(t, cmd); r.code != 0 || !strings.Contains(r.stdout, "Disassembly of spin") {
		t.Errorf("perf annotate main_spin: exit %d: %.500s%s", r.code, r.stdout, r.stderr)
	}
}

// The same for the whole host, written in pipe mode.
func TestInjectAll(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	pid := startSpin(t, buildSpin(t))
	dir := t.TempDir()
	out, ref := filepath.Join(dir, "out.data"), filepath.Join(dir, "ref.data")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	wg.Go(func() { perfRecordRef(t, perf, ref, "-a", "-k", "CLOCK_MONOTONIC", "-F", "999", "-g") })
	rec := []string{"-a", "--synth=no", "-k", "CLOCK_MONOTONIC", "-F", "999", "-g"}
	r := injectPipe(t, perf, rec, []string{"-o", "-"}, f)
	wg.Wait()
	if r.code != 0 {
		t.Fatalf("synth inject -o -: exit %d: %s", r.code, r.stderr)
	}
	// The header of pipe mode is 16 bytes long, and says so.
	if b, _ := os.ReadFile(out); len(b) < 16 || b[8] != 16 {
		t.Errorf("synth inject -o - wrote no pipe-mode perf.data")
	}
	checkInjected(t, perf, out, ref, pid, "--pid", strconv.Itoa(pid), "--percentage", "relative")
}

// An MMAP2 of perf's with a build ID over 20 bytes, which perf 6.1
// aborts on, is passed on without it, and synth inject warns once.
func TestInjectOversizeBuildIDWarns(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.data"), filepath.Join(dir, "out.data")
	rec := exec.Command(perf, "record", "-q", "--buildid-mmap", "-a", "--synth=no", "-k", "CLOCK_MONOTONIC",
		"-o", "-", "--", "sleep", "0.2")
	rec.Env = perfEnv(t)
	r := runCmd(t, rec)
	if r.code != 0 {
		t.Fatalf("perf record: exit %d: %s", r.code, r.stderr)
	}
	stream, bad := []byte(r.stdout), 0
	for off := 16; off+8 <= len(stream); {
		h, err := perfdata.ParseHeader(stream[off:])
		if err != nil || h.Size < 8 || h.Type == perfdata.RecordHeaderTracingData || h.Type == perfdata.RecordAuxtrace {
			t.Fatalf("perf's stream at %d: %v %v", off, h.Type, err)
		}
		if h.Type == perfdata.RecordMmap2 && h.Misc&perfdata.MiscMmapBuildID != 0 {
			stream[off+40] = 32
			bad++
		}
		off += int(h.Size)
	}
	if bad == 0 {
		t.Fatal("perf record --buildid-mmap wrote no MMAP2 with a build ID")
	}
	if err := os.WriteFile(in, stream, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCmd(t, exec.Command(synthBin, "inject", "--no-buildid", "-i", in, "-o", out))
	want := fmt.Sprintf("synth: inject: warning: %d of perf's MMAP2 records had a build-ID bit perf would misread (the kernel's, or a size over 20): passed on without it\n", bad)
	// Once, and only this warning of the build-ID bit: another profiler
	// on the host may have grown perf's KSYMBOL records, which synth
	// inject cuts with a warning of its own.
	if r.code != 0 || strings.Count(r.stderr, "build-ID bit") != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("synth inject: exit %d: %s", r.code, r.stderr)
	}
	report := exec.Command(perf, "report", "--stdio", "-i", out)
	report.Env = perfEnv(t)
	if r := runCmd(t, report); r.code != 0 || strings.Contains(r.stderr, "assertion failed") {
		t.Errorf("perf report: exit %d: %.1000s", r.code, r.stderr)
	}
}

// A process that perf's recording sees for 200 ms only: started before
// perf, it loads a library (libspin.so, as libspinexit.so) 100 ms after
// perf enables its events and exits 100 ms later. Its samples land on its binary and library, not
// [unknown], only if synth inject's dump read it before it exited: the
// dump must not wait for the method to load after perf's header came.
func TestInjectEarlyExit(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	dir := filepath.Dir(buildSpin(t))
	bin, src := filepath.Join(dir, "spinexit"), filepath.Join("..", "..", "testdata", "spin", "spinexit.c")
	if out, err := exec.Command("gcc", "-O1", "-fno-omit-frame-pointer", "-o", bin, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, out)
	}
	// The library under a name of its own: perf report --sort dso merges
	// the entries of files of one short name, the spin processes' of
	// other tests too, and --comms then keeps or drops them together.
	lib, err := os.ReadFile(filepath.Join(dir, "libspin.so"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "libspinexit.so"), lib, 0o755); err != nil {
		t.Fatal(err)
	}
	work := exec.Command(bin, filepath.Join(dir, "libspinexit.so"))
	work.SysProcAttr = dieWithTest()
	var workErr bytes.Buffer
	work.Stderr = &workErr
	begin, err := work.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { work.Process.Kill(); work.Wait() })
	time.Sleep(200 * time.Millisecond) // its mappings exist before recording

	out := filepath.Join(t.TempDir(), "out.data")
	rec := exec.Command(perf, "record", "-a", "--synth=no", "-k", "CLOCK_MONOTONIC", "-F", "999", "-o", "-", "--", "sleep", "1.5")
	rec.Env = perfEnv(t)
	var perfErr, injErr bytes.Buffer
	rec.Stderr = &perfErr
	perfOut, err := rec.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	inj := exec.Command(synthBin, "inject", "-v", "-o", out)
	inj.Stderr = &injErr
	injIn, err := inj.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := inj.Start(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	// perf's stream goes to synth inject through the test, which starts
	// the workload's 200 ms when FINISHED_INIT passes: perf enables its
	// events right before it writes it.
	relayErr := relayPerf(perfOut, injIn, func() { begin.Write([]byte{'\n'}) })
	injIn.Close()
	if err := rec.Wait(); err != nil {
		t.Errorf("perf record: %v\n%s", err, perfErr.String())
	}
	if err := inj.Wait(); err != nil {
		t.Fatalf("synth inject: %v\n%s", err, injErr.String())
	}
	if relayErr != nil {
		t.Fatal(relayErr)
	}
	if err := work.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, workErr.String())
	}
	t.Logf("synth inject -v:\n%s", injErr.String())

	got := report(t, perf, "-i", out, "--no-children", "--comms", "spinexit", "--percentage", "relative")
	unknown, kernel := 0.0, 0.0
	for k, v := range got {
		if strings.Contains(k, "[unknown]") {
			unknown += v
		}
		if strings.HasPrefix(k, "[kernel.kallsyms] ") {
			kernel += v
		}
	}
	onBin, onLib := got["spinexit main_spin"], got["libspinexit.so lib_spin"]
	if user := 100 - kernel; onBin == 0 || onLib == 0 || (onBin+onLib)/user < 0.9 || unknown > 1 {
		t.Errorf("spinexit: %.2f%% on its binary, %.2f%% on libspinexit.so, of %.2f%% in user space (want both, >= 90%% of it), %.2f%% unknown (want <= 1): %v",
			onBin, onLib, user, unknown, major(got))
	}
}

// relayPerf copies perf's pipe-mode stream from r to w, and calls
// atInit once it has passed perf's FINISHED_INIT on.
func relayPerf(r io.Reader, w io.Writer, atInit func()) error {
	head := make([]byte, 16)
	if _, err := io.ReadFull(r, head); err != nil {
		return fmt.Errorf("perf's stream: %w", err)
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	for {
		if _, err := io.ReadFull(r, buf[:8]); err != nil {
			return fmt.Errorf("perf's stream ended before FINISHED_INIT: %w", err)
		}
		h, err := perfdata.ParseHeader(buf[:8])
		if err != nil || h.Size < 8 || h.Type == perfdata.RecordHeaderTracingData || h.Type == perfdata.RecordAuxtrace {
			return fmt.Errorf("perf's stream: record %v of %d bytes: %v", h.Type, h.Size, err)
		}
		if _, err := io.ReadFull(r, buf[8:h.Size]); err != nil {
			return fmt.Errorf("perf's stream: %w", err)
		}
		if _, err := w.Write(buf[:h.Size]); err != nil {
			return err
		}
		if h.Type == perfdata.RecordFinishedInit {
			break
		}
	}
	atInit()
	_, err := io.Copy(w, r)
	return err
}
