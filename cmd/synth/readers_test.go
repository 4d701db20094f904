package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/synth-dev/synth/internal/hostarch"
	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

// perfparserPath is hotspot's perf.data parser (Debian hotspot).
var perfparserPath = filepath.Join(hostarch.LibDir(), "libexec/hotspot-perfparser")

var perfread struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// perfreadBin builds testdata/perfread, a reader on the Rust
// linux-perf-data crate, offline against Debian's packaged crates.
func perfreadBin(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("/usr/bin/cargo")
	testenv.Need(t, err == nil, "cargo and librust-linux-perf-data-dev (make deps)")
	perfread.once.Do(func() {
		src, _ := filepath.Abs("../../testdata/perfread")
		target, err := os.MkdirTemp("", "perfread")
		if err != nil {
			perfread.err = err
			return
		}
		cmd := exec.Command("/usr/bin/cargo", "build", "--release", "--offline", "-q")
		cmd.Dir = src
		// rustup's cargo, where Debian's is not the one installed, finds
		// its toolchain under the real HOME.
		cmd.Env = append(os.Environ(), "HOME="+realHome, "CARGO_TARGET_DIR="+target, "CARGO_HOME="+filepath.Join(target, "home"))
		perfread.out, perfread.err = cmd.CombinedOutput()
		perfread.bin = filepath.Join(target, "release", "perfread")
	})
	if perfread.err != nil {
		t.Fatalf("build perfread: %v\n%s", perfread.err, perfread.out)
	}
	return perfread.bin
}

// perfparserDiag runs hotspot's perfparser on a file (or, for "", on
// stdin from in) and returns its diagnostics: stderr lines, sorted and
// unique, but for the notes it prints for any perf.data.
func perfparserDiag(t *testing.T, file string, in *exec.Cmd) []string {
	t.Helper()
	_, err := os.Stat(perfparserPath)
	testenv.Need(t, err == nil, "hotspot's perfparser (make deps)")
	out := filepath.Join(t.TempDir(), "out.b2qt")
	cmd := exec.Command(perfparserPath, "--output", out)
	if file != "" {
		cmd.Args = append(cmd.Args, "--input", file)
	} else {
		pipe, err := in.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = pipe
		if err := in.Start(); err != nil {
			t.Fatal(err)
		}
		defer in.Wait()
	}
	r := runCmd(t, cmd)
	if st, err := os.Stat(out); r.code != 0 || err != nil || st.Size() == 0 {
		t.Fatalf("perfparser %s: exit %d, output %v: %s", file, r.code, err, r.stderr)
	}
	var diag []string
	for _, l := range strings.Split(r.stderr, "\n") {
		switch {
		case l == "", strings.HasPrefix(l, "unhandled event type "), // records it skips, perf's own types
			strings.HasPrefix(l, "FINISHED_ROUND detected"), strings.HasPrefix(l, "Linux version"),
			strings.HasPrefix(l, "synth: "): // synth's own summary, in pipe mode
			continue
		}
		// "feature not properly read PerfHeader::BPF_BTF SIZE READ":
		// a section perfparser skips, whatever its size.
		if f := strings.Fields(l); strings.HasPrefix(l, "feature not properly read ") && len(f) > 5 {
			l = strings.Join(f[:5], " ")
		}
		diag = append(diag, l)
	}
	slices.Sort(diag)
	return slices.Compact(diag)
}

// recordCounts counts the MMAP2, COMM and FORK records of a perf.data,
// as our reader reads them, in perfread's words.
func recordCounts(t *testing.T, path string) map[string]int {
	counts := map[string]int{}
	for _, rec := range perftest.ReadRecords(t, path) {
		switch rec.Type {
		case perfdata.RecordMmap2:
			counts["MMAP2"]++
		case perfdata.RecordComm:
			counts["COMM"]++
		case perfdata.RecordFork:
			counts["FORK"]++
		}
	}
	return counts
}

// Readers nobody at synth wrote accept synth's files: hotspot's
// perfparser says nothing about them that it does not say about perf's
// own recording, in file and pipe mode; a reader on the Rust
// linux-perf-data crate parses every record, and counts the same
// records as we do (file mode: version 0.6 of the crate reads no pipe).
func TestOutsideReaders(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	perfreadBin(t)
	dir := t.TempDir()
	ref := filepath.Join(dir, "perf.data")
	perftest.RecordHost(t, ref)
	known := perfparserDiag(t, ref, nil)
	for _, args := range [][]string{
		{"dump", "--namespaces", "--all-cgroups"},
		{"dump", "--data"},
		{"record", "-g", "--", "sleep", "0.3"},
	} {
		name := strings.Join(args, " ")
		file := filepath.Join(dir, strconv.Itoa(len(name))+".data")
		if r := runCmd(t, exec.Command(synthBin, append([]string{args[0], "-o", file}, args[1:]...)...)); r.code != 0 {
			t.Fatalf("synth %s: exit %d: %s", name, r.code, r.stderr)
		}
		pipe := exec.Command(synthBin, append([]string{args[0], "-o", "-"}, args[1:]...)...)
		for mode, diag := range map[string][]string{"file": perfparserDiag(t, file, nil), "pipe": perfparserDiag(t, "", pipe)} {
			for _, l := range diag {
				if !slices.Contains(known, l) {
					t.Errorf("synth %s, %s mode: perfparser says %q, which it does not say of perf's own file", name, mode, l)
				}
			}
		}
		r := runCmd(t, exec.Command(perfread.bin, file))
		if r.code != 0 || r.stderr != "" {
			t.Errorf("synth %s: perfread: exit %d: %s", name, r.code, r.stderr)
			continue
		}
		got := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			i := strings.LastIndexByte(l, ' ')
			got[l[:i]], _ = strconv.Atoi(l[i+1:])
		}
		for typ, n := range recordCounts(t, file) {
			if got[typ] != n {
				t.Errorf("synth %s: perfread counts %d %s records, we count %d", name, got[typ], typ, n)
			}
		}
		if got["build-ids"] == 0 {
			t.Errorf("synth %s: perfread finds no build IDs: %s", name, r.stdout)
		}
	}
}
