package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// procMethods are the /proc methods this kernel has: procquery needs
// PROCMAP_QUERY (6.11; a 6.11+ kernel without it fails t under
// SYNTH_REQUIRE).
func procMethods(t *testing.T) []string {
	t.Helper()
	m, err := synth.OpenMethod(synth.MethodProcquery, synth.MethodOptions{Threads: 1})
	if err == nil {
		m.Close()
		return []string{synth.MethodProcmaps.String(), synth.MethodProcquery.String()}
	}
	if !errors.Is(err, synth.ErrNoProcquery) {
		t.Fatal(err)
	}
	testenv.Feature(t, false, "6.11", "no PROCMAP_QUERY: procquery is not checked")
	return []string{synth.MethodProcmaps.String()}
}

// A program the kernel refuses is named with the verifier's own verdict
// on the one line that says so, and with -v with the end of the
// verifier's log, not with cilium/ebpf's "(N line(s) omitted)". The
// running kernel's verifier refuses the program here (RefuseProgram);
// the dump runs in this process, so that the hook reaches it. 6.1's
// log gives the source line without its "@ file:line".
func TestVerifierReason(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, testproc.Spec{})
	run := func(t *testing.T, args ...string) (int, string) {
		var stderr bytes.Buffer
		out := filepath.Join(t.TempDir(), "perf.data")
		args = append([]string{"-v", "--no-kernel", "--no-buildid", "-p", strconv.Itoa(p.Pid), "-o", out}, args...)
		code := runDump(t.Context(), args, nil, &stderr)
		t.Logf("synth dump %s:\n%s", strings.Join(args, " "), stderr.String())
		return code, stderr.String()
	}
	verdict := regexp.MustCompile(`load BPF program (\w+): refused by the verifier: R0 !read_ok at insn 0: \(95\) exit \(int \w+\(struct bpf_iter__\w+ \*ctx\)( @ \w+\.bpf\.[ch]:\d+)?\)`)
	logged := regexp.MustCompile(`(?m)^synth: the verifier refused (\w+); the end of its log:\n(synth:   .*\n)*synth:   ; .+\nsynth:   0: \(95\) exit\nsynth:   R0 !read_ok\n`)
	check := func(t *testing.T, stderr, prog, prefix string) {
		t.Helper()
		if m := verdict.FindStringSubmatch(stderr); m == nil || m[1] != prog ||
			!strings.Contains(stderr, prefix+m[0]) {
			t.Errorf("no line %q with the verifier's verdict on %s", prefix, prog)
		}
		if m := logged.FindStringSubmatch(stderr); m == nil || m[1] != prog {
			t.Errorf("-v does not print the end of the verifier's log of %s", prog)
		}
		if strings.Contains(stderr, "omitted") {
			t.Error("the reason omits the verifier's lines")
		}
	}
	t.Run("walk", func(t *testing.T) {
		code, stderr := run(t)
		if code != exitOK {
			t.Fatalf("exit %d", code)
		}
		if !strings.Contains(stderr, "synth: method bpf (walk maple)") {
			t.Skip("no maple walk on this kernel: nothing to refuse")
		}
		defer bpfmethod.RefuseProgram(synthbpf.SynthProgDumpTasks)()
		if code, stderr = run(t); code != exitOK {
			t.Fatalf("exit %d", code)
		}
		check(t, stderr, "dump_tasks", "synth: walk iter, not maple: ")
	})
	t.Run("method", func(t *testing.T) {
		defer bpfmethod.RefuseProgram(synthbpf.SynthProgDumpVma)()
		code, stderr := run(t, "--method", "bpf", "--walk", "iter")
		if code != exitError {
			t.Fatalf("exit %d, want %d", code, exitError)
		}
		check(t, stderr, "dump_vma", "synth: ")
	})
}
