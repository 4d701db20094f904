package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

var everything = testproc.Spec{
	LongPath: true, SpacePath: true, Deleted: true, Memfd: true, AnonExec: true,
	DataFile: true, ManyVMAs: 5000,
	Threads: []string{"synth-a", "synth b worker"},
}

// perfEnv keeps perf away from the user's ~/.debug and config.
func perfEnv(t *testing.T) []string { return perftest.Env(t) }

// File mode: perf script and perf report -D read the file without a
// warning and list exactly the test process's mappings.
func TestDumpFilePerf(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	p := testproc.StartT(t, everything)
	for _, data := range []bool{false, true} {
		file := filepath.Join(t.TempDir(), "perf.data")
		args := []string{"dump", "-o", file}
		if data {
			args = append(args, "--data")
		}
		r := runCmd(t, exec.Command(synthBin, args...))
		if r.code != 0 {
			t.Fatalf("synth %v: exit %d: %s", args, r.code, r.stderr)
		}
		sum := parseSummary(t, r.stderr)
		if sum.lost != 0 || sum.method != "bpf" || sum.mappings < 2500 || (data && sum.mappings < 5000) {
			t.Errorf("summary %+v", sum)
		}
		script := exec.Command(perf, "script", "--show-mmap-events", "--show-task-events", "-i", file)
		script.Env = perfEnv(t)
		sr := runCmd(t, script)
		noWarnings(t, "perf script", sr)
		perftest.CheckOutput(t, "perf script", sr.stdout, p, data)

		report := exec.Command(perf, "report", "-D", "-i", file)
		report.Env = perfEnv(t)
		rr := runCmd(t, report)
		noWarnings(t, "perf report -D", rr)
		perftest.CheckOutput(t, "perf report -D", rr.stdout, p, data)
		if n := strings.Count(rr.stdout, ": PERF_RECORD_MMAP2 "); n != sum.mappings {
			t.Errorf("perf report -D shows %d MMAP2 records, synth says it wrote %d", n, sum.mappings)
		}
	}
}

// Pipe mode: synth dump | perf script -i -, and the same into perf
// report -D.
func TestDumpPipePerf(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	p := testproc.StartT(t, everything)
	for _, tool := range [][]string{
		{"script", "--show-mmap-events", "--show-task-events", "-i", "-"},
		{"report", "-D", "-i", "-"},
	} {
		synth := exec.Command(synthBin, "dump", "--data")
		consumer := exec.Command(perf, tool...)
		consumer.Env = perfEnv(t)
		pipe, err := synth.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		consumer.Stdin = pipe
		var synthErr strings.Builder
		synth.Stderr = &synthErr
		if err := synth.Start(); err != nil {
			t.Fatal(err)
		}
		cr := runCmd(t, consumer)
		if err := synth.Wait(); err != nil {
			t.Fatalf("synth dump: %v: %s", err, synthErr.String())
		}
		if sum := parseSummary(t, synthErr.String()); sum.lost != 0 {
			t.Errorf("summary %+v", sum)
		}
		noWarnings(t, "perf "+tool[0], cr)
		perftest.CheckOutput(t, "perf "+tool[0]+" (pipe)", cr.stdout, p, true)
	}
}

// The smallest ring loses nothing on the whole host. (A smaller one is
// a usage error: testdata/script/grammar.txtar.)
func TestDumpMinRing(t *testing.T) {
	testenv.Root(t)
	testproc.StartT(t, testproc.Spec{ManyVMAs: 5000, LongPath: true})
	r := runCmd(t, exec.Command(synthBin, "dump", "--data", "--ring-pages", "16", "-o", filepath.Join(t.TempDir(), "perf.data")))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if sum := parseSummary(t, r.stderr); sum.lost != 0 || sum.mappings < 5000 {
		t.Errorf("summary %+v", sum)
	}
}

// synth dump -v says where the time went: for bpf the loading's steps
// (the kernel's BTF, each program) and the dump's, for procmaps the
// dump's; every step with a time in milliseconds. With the kernel cache
// (root's, filled by the run before), the programs load from it, named
// so, and the kernel's BTF is not read.
func TestDumpVerbose(t *testing.T) {
	testenv.Root(t)
	_, errNotes := os.Stat("/sys/kernel/notes")
	_, errBTF := os.Stat("/sys/kernel/btf/vmlinux")
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{"bpf", []string{"--method", "bpf", "--no-kernel-cache"},
			[]string{"BPF object", "kernel BTF", "maps", "probe", "walk", "write"}, []string{"probe (cached)"}},
		{"bpf cached", []string{"--method", "bpf"},
			[]string{"BPF object", "maps", "probe (cached)", "walk", "write"}, []string{"kernel BTF", "probe"}},
		{"procmaps", []string{"--method", "procmaps"}, []string{"kernel maps", "processes"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "bpf cached" {
				if errNotes != nil || errBTF != nil {
					t.Logf("not checked: no kernel cache on this kernel (no build ID or no BTF): %v %v", errNotes, errBTF)
					return
				}
				// The first run fills the cache where it was empty; a
				// host whose cache cannot be used says why, once.
				fill := runCmd(t, exec.Command(synthBin, "dump", "-v", "--method", "bpf", "-o", filepath.Join(t.TempDir(), "perf.data")))
				if hostCacheUnusable(fill.stderr) {
					t.Logf("not checked: this host's kernel cache cannot be used, and synth says why:\n%s", fill.stderr)
					return
				}
			}
			args := append(append([]string{"dump", "-v"}, tc.args...), "-o", filepath.Join(t.TempDir(), "perf.data"))
			r := runCmd(t, exec.Command(synthBin, args...))
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var line string
			for _, l := range strings.Split(r.stderr, "\n") {
				if s, ok := strings.CutPrefix(l, "synth: time: "); ok {
					line = s
				}
			}
			steps := map[string]bool{}
			for _, part := range strings.Split(line, ", ") {
				i := strings.LastIndexByte(part, ' ')
				j := strings.LastIndexByte(part[:max(i, 0)], ' ')
				if i < 0 || j < 0 || part[i+1:] != "ms" {
					t.Fatalf("step %q in %q: want NAME MS ms", part, line)
				}
				if _, err := strconv.ParseFloat(part[j+1:i], 64); err != nil {
					t.Errorf("step %q: %v", part, err)
				}
				steps[part[:j]] = true
			}
			for _, name := range tc.want {
				if !steps[name] {
					t.Errorf("no step %q in %q", name, line)
				}
			}
			for _, name := range tc.notWant {
				if steps[name] {
					t.Errorf("step %q in %q", name, line)
				}
			}
			// The walk's program is loaded; the task_vma iterator's only
			// for the iterator walk, or for a process the maple walk
			// read again with it.
			for name := range steps {
				if p, ok := strings.CutSuffix(name, " (cached)"); ok {
					steps[p] = true
				}
			}
			maple := strings.Contains(r.stderr, "(walk maple)")
			switch {
			case tc.args[1] != "bpf":
			case maple && !steps["dump_tasks"], !maple && !steps["dump_vma"]:
				t.Errorf("no step of the walk's program in %q", line)
			case maple && steps["dump_vma"] && strings.Contains(r.stderr, " 0 processes read again"):
				t.Errorf("dump_vma loaded, and no process read with it: %q", line)
			}
			if tc.args[1] == "bpf" && maple && !strings.Contains(r.stderr, "synth: maple walk: ") {
				t.Errorf("no maple walk counts in:\n%s", r.stderr)
			}
		})
	}
}

// hostCacheUnusable reports whether synth dump -v's stderr says that
// this host's kernel cache cannot be used: its directory is refused, or
// the filesystem will not take a file (read-only, full, not permitted).
// A store that fails for another reason is synth's fault, not the
// host's.
func hostCacheUnusable(stderr string) bool {
	if strings.Contains(stderr, "synth: kernel cache: cache directory") {
		return true
	}
	for _, why := range []string{"read-only file system", "no space left on device", "operation not permitted", "permission denied"} {
		if strings.Contains(stderr, "not kept: ") && strings.Contains(stderr, why) {
			return true
		}
	}
	return false
}
