package synth_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/hostarch"
	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
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
		src, _ := filepath.Abs("../testdata/perfread")
		target, err := os.MkdirTemp("", "perfread")
		if err != nil {
			perfread.err = err
			return
		}
		cmd := exec.Command("/usr/bin/cargo", "build", "--release", "--offline", "-q")
		cmd.Dir = src
		// rustup's cargo, where Debian's is not the one installed, finds
		// its toolchain under HOME, which it keeps.
		cmd.Env = append(os.Environ(), "CARGO_TARGET_DIR="+target, "CARGO_HOME="+filepath.Join(target, "home"))
		perfread.out, perfread.err = cmd.CombinedOutput()
		perfread.bin = filepath.Join(target, "release", "perfread")
	})
	if perfread.err != nil {
		t.Fatalf("build perfread: %v\n%s", perfread.err, perfread.out)
	}
	return perfread.bin
}

// perfparserDiag runs hotspot's perfparser on a file (or, for "", on
// stdin) and returns its diagnostics: stderr lines, sorted and unique,
// but for the notes it prints for any perf.data.
func perfparserDiag(t *testing.T, file string, stdin *os.File) []string {
	t.Helper()
	_, err := os.Stat(perfparserPath)
	testenv.Need(t, err == nil, "hotspot's perfparser (make deps)")
	out := filepath.Join(t.TempDir(), "out.b2qt")
	cmd := exec.Command(perfparserPath, "--output", out)
	if file != "" {
		cmd.Args = append(cmd.Args, "--input", file)
	} else {
		cmd.Stdin = stdin
	}
	r := perftest.Run(t, cmd)
	if st, err := os.Stat(out); r.Code != 0 || err != nil || st.Size() == 0 {
		t.Fatalf("perfparser %s: exit %d, output %v: %s", file, r.Code, err, r.Stderr)
	}
	var diag []string
	for _, l := range strings.Split(r.Stderr, "\n") {
		switch {
		case l == "", strings.HasPrefix(l, "unhandled event type "), // records it skips, perf's own types
			strings.HasPrefix(l, "FINISHED_ROUND detected"), strings.HasPrefix(l, "Linux version"):
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

// Readers nobody at synth wrote accept the library's files: hotspot's
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
	spin := synth.Options{Target: synth.Target{Pids: []int{spinner(t, "while :; do :; done")}}}
	for i, w := range []libWrite{
		dumping("WritePerfData, Namespaces and Cgroups", synth.Options{Namespaces: true, Cgroups: true}),
		dumping("WritePerfData, Data", synth.Options{Data: true}),
		profiling("Profile of a shell, Callchain", synth.ProfileOptions{Options: spin, Callchain: true}, 300*time.Millisecond),
	} {
		name := w.name
		file := filepath.Join(dir, strconv.Itoa(i)+".data")
		writeFile(t, file, func(out io.Writer) error { return w.write(out, synth.WriteOptions{}) })
		pipe, wait := piped(t, func(out io.Writer) error { return w.write(out, synth.WriteOptions{Mode: perfdata.ModePipe}) })
		pipeDiag := perfparserDiag(t, "", pipe)
		if err := wait(); err != nil {
			t.Fatalf("%s, pipe mode: %v", name, err)
		}
		for mode, diag := range map[string][]string{"file": perfparserDiag(t, file, nil), "pipe": pipeDiag} {
			for _, l := range diag {
				if !slices.Contains(known, l) {
					t.Errorf("%s, %s mode: perfparser says %q, which it does not say of perf's own file", name, mode, l)
				}
			}
		}
		r := perftest.Run(t, exec.Command(perfread.bin, file))
		if r.Code != 0 || r.Stderr != "" {
			t.Errorf("%s: perfread: exit %d: %s", name, r.Code, r.Stderr)
			continue
		}
		got := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			i := strings.LastIndexByte(l, ' ')
			got[l[:i]], _ = strconv.Atoi(l[i+1:])
		}
		for typ, n := range recordCounts(t, file) {
			if got[typ] != n {
				t.Errorf("%s: perfread counts %d %s records, we count %d", name, got[typ], typ, n)
			}
		}
		if got["build-ids"] == 0 {
			t.Errorf("%s: perfread finds no build IDs: %s", name, r.Stdout)
		}
	}
}
