package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/cmd/synth/internal/loadgen"
	"github.com/synth-dev/synth/cmd/synth/internal/workload"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

// synthBin is the synth command built for the tests, in a directory
// every user can read, so that it can also run unprivileged.
var synthBin string

func TestMain(m *testing.M) {
	testproc.Main()
	// The test binary is also synth inside the scripts (testscript
	// copies it as synth into their PATH), and so the re-executed
	// workload and load processes of that synth too.
	loadgen.Main()
	workload.Main()
	testscript.Main(buildingM{m}, map[string]func(){"synth": main})
}

// buildingM builds synthBin before it runs the tests.
type buildingM struct{ m *testing.M }

func (b buildingM) Run() int { return buildAndRun(b.m) }

func buildAndRun(m *testing.M) int {
	// make vmtest builds synth on the host: no go build in the guest.
	if bin := os.Getenv("SYNTH_BIN"); bin != "" {
		synthBin = bin
		return runAwayFromHome(m)
	}
	dir, err := os.MkdirTemp("", "synth-cmd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	synthBin = filepath.Join(dir, "synth")
	out, err := exec.Command("go", "build", "-o", synthBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build synth: %v\n%s", err, out)
		return 1
	}
	return runAwayFromHome(m)
}

// realHome is the HOME the tests were started with: tools that keep
// their setup there (rustup's cargo) need it.
var realHome string

// runAwayFromHome runs the tests with HOME a new directory: synth record
// and inject fill the build-ID cache in ~/.debug, as perf record does,
// and the tests' recordings are not to fill the user's. It is set after
// go build, whose cache is under HOME.
func runAwayFromHome(m *testing.M) int {
	home, err := os.MkdirTemp("", "synth-home")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(home)
	realHome = os.Getenv("HOME")
	os.Setenv("HOME", home)
	os.Unsetenv("PERF_CONFIG")
	return m.Run()
}

// result is how a command ended.
type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	keepPerfInput(t, cmd)
	var stdout, stderr bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return r
}

// keepPerfInput has the file a perf command reads (-i FILE) kept when
// the test fails, with its place in the test's log (testenv.Keep): the
// test's temporary directory is gone by the time one looks.
func keepPerfInput(t *testing.T, cmd *exec.Cmd) {
	if filepath.Base(cmd.Path) != "perf" {
		return
	}
	for i, a := range cmd.Args[:len(cmd.Args)-1] {
		if in := cmd.Args[i+1]; (a == "-i" || a == "--input") && in != "-" {
			if _, err := os.Stat(in); err == nil {
				testenv.KeepOnFailure(t, in)
			}
		}
	}
}

// summary is the numbers of synth's summary on stderr: one line, and a
// second about build IDs unless --no-buildid.
type summary struct {
	method, walk, walkFallback         string
	processes, mappings, records, lost int
	buildIDs, fileMappings             int
	unreadable                         int
	cached, filesRead, idsRead         int
	hasBuildIDLine                     bool
	idTimeouts                         int    // files whose build ID was not read in time
	lockedOut                          string // processes left out for their mmap lock, as named
	live, duplicates                   int
	hasLiveLine                        bool
}

var (
	idTimeoutRE    = regexp.MustCompile(`synth: warning: (\d+) files not read within \S+ \(their reads block\): their mappings are identified by inode, without a build ID\n$`)
	summaryRE      = regexp.MustCompile(`^synth: method (\w+)(?: \(walk (\w+)\))?: (\d+) processes, (\d+) mappings, (\d+) records, (\d+) lost, \S+ \(\S+ with loading\)\n`)
	liveRE         = regexp.MustCompile(`synth: live side-band: (\d+) records while dumping, (\d+) synthesized records dropped as reported live first\n$`)
	lockedOutRE    = regexp.MustCompile(`synth: warning: \d+ processes left out: their mmap lock was not taken within \S+ \(a writer holds it\): (.+)\n$`)
	unreadableRE   = regexp.MustCompile(`synth: warning: (\d+) of \d+ processes' mappings could not be read \(permission denied\)(?:; run as root for all of them)?\n$`)
	walkFallbackRE = regexp.MustCompile(`^synth: walk iter, not maple: (.+)\n`)
	programTimeRE  = regexp.MustCompile(`^synth: BPF programs ran \S+ of it \(kernel.bpf_stats_enabled\)\n`)
	buildIDRE      = regexp.MustCompile(`^synth: build IDs: (\d+) of (\d+) file-backed mappings; (\d+) files in the cache; read now: (\d+) files, (\d+) with a build ID\n$`)
)

func parseSummary(t *testing.T, stderr string) summary {
	t.Helper()
	// On a busy host the kernel may drop live records: a warning line,
	// which TestDumpUnderStorm checks.
	stderr = stripLostWarning(stderr)
	m := summaryRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not start with the summary line: %q", stderr)
	}
	n := func(m []string, i int) int { v, _ := strconv.Atoi(m[i]); return v }
	s := summary{method: m[1], walk: m[2], processes: n(m, 3), mappings: n(m, 4), records: n(m, 5), lost: n(m, 6)}
	rest := stderr[len(m[0]):]
	if w := walkFallbackRE.FindStringSubmatch(rest); w != nil {
		s.walkFallback = w[1]
		rest = rest[len(w[0]):]
	}
	if l := liveRE.FindStringSubmatchIndex(rest); l != nil {
		s.live, _ = strconv.Atoi(rest[l[2]:l[3]])
		s.duplicates, _ = strconv.Atoi(rest[l[4]:l[5]])
		s.hasLiveLine = true
		rest = rest[:l[0]]
	}
	if l := idTimeoutRE.FindStringSubmatchIndex(rest); l != nil {
		s.idTimeouts, _ = strconv.Atoi(rest[l[2]:l[3]])
		rest = rest[:l[0]]
	}
	if l := lockedOutRE.FindStringSubmatchIndex(rest); l != nil {
		s.lockedOut = rest[l[2]:l[3]]
		rest = rest[:l[0]]
	}
	// Processes whose maps no one may read (here: pid 1 of the VM's
	// sandbox, even for root) are the host's, not the test's.
	if l := unreadableRE.FindStringSubmatchIndex(rest); l != nil {
		s.unreadable, _ = strconv.Atoi(rest[l[2]:l[3]])
		rest = rest[:l[0]]
	}
	rest = programTimeRE.ReplaceAllString(rest, "")
	if rest == "" {
		return s
	}
	b := buildIDRE.FindStringSubmatch(rest)
	if b == nil {
		t.Fatalf("stderr after the summary is not the build-ID line: %q", rest)
	}
	s.buildIDs, s.fileMappings, s.cached, s.filesRead, s.idsRead = n(b, 1), n(b, 2), n(b, 3), n(b, 4), n(b, 5)
	s.hasBuildIDLine = true
	return s
}

// perfMmap2RE matches perf 6.1's text for an MMAP2 record, as perf script
// and perf report -D print it.
var perfMmap2RE = regexp.MustCompile(`PERF_RECORD_MMAP2 (\d+)/(\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0) ([0-9a-f]+):([0-9a-f]+) (\d+) (\d+)\]: ([r-])([w-])([x-])([sp]) (.*)$`)

// perfMaps returns, for process pid, the mappings perf printed, in
// /proc/PID/maps form; "//anon" reads as an anonymous mapping.
func perfMaps(t *testing.T, out string, pid int) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(out, "\n") {
		m := perfMmap2RE.FindStringSubmatch(line)
		if m == nil {
			m = buildIDForm(t, line, pid)
		}
		if m == nil || m[1] != strconv.Itoa(pid) {
			continue
		}
		start, _ := strconv.ParseUint(m[3], 16, 64)
		size, _ := strconv.ParseUint(m[4], 16, 64)
		pgoff, _ := strconv.ParseUint(strings.TrimPrefix(m[5], "0x"), 16, 64)
		maj, _ := strconv.ParseUint(m[6], 16, 32)
		min, _ := strconv.ParseUint(m[7], 16, 32)
		path := m[14]
		if path == "//anon" {
			path = ""
		}
		got = append(got, mapLine(procfs.Mapping{
			Start: start, End: start + size, Pgoff: pgoff, Maj: uint32(maj), Min: uint32(min),
			Ino: mustUint(m[8]), Prot: perm(m[10], 1) | perm(m[11], 2) | perm(m[12], 4),
			Shared: m[13] == "s", Path: path,
		}))
	}
	return got
}

// perfMmap2BuildIDRE matches the build-ID form of an MMAP2 record.
var perfMmap2BuildIDRE = regexp.MustCompile(`PERF_RECORD_MMAP2 (\d+)/(\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0) <([0-9a-f]+)>\]: ([r-])([w-])([x-])([sp]) (.*)$`)

// buildIDForm reads an MMAP2 line of the build-ID form of process pid
// into the groups of perfMmap2RE. The build ID must be the file's; maj, min and ino, which
// the record does not carry, are then the file's too, from stat(2).
func buildIDForm(t *testing.T, line string, pid int) []string {
	t.Helper()
	b := perfMmap2BuildIDRE.FindStringSubmatch(line)
	if b == nil || b[1] != strconv.Itoa(pid) {
		return nil
	}
	path := b[11]
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("%s: %v", line, err)
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	id, err := elfnote.BuildID(f, fi.Size())
	if err != nil || hex.EncodeToString(id) != b[6] {
		t.Errorf("%s: the file's build ID is %x (%v)", line, id, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return []string{b[0], b[1], b[2], b[3], b[4], b[5],
		strconv.FormatUint(uint64(unix.Major(st.Dev)), 16), strconv.FormatUint(uint64(unix.Minor(st.Dev)), 16),
		strconv.FormatUint(st.Ino, 10), "0", b[7], b[8], b[9], b[10], path}
}

func perm(s string, bit uint32) uint32 {
	if s == "-" {
		return 0
	}
	return bit
}

func mustUint(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }

func mapLine(m procfs.Mapping) string {
	return fmt.Sprintf("%x-%x prot=%d shared=%v %x %x:%x %d %q",
		m.Start, m.End, m.Prot, m.Shared, m.Pgoff, m.Maj, m.Min, m.Ino, m.Path)
}

// procMaps returns what /proc/PID/maps says, in the same form.
func procMaps(t *testing.T, pid int, data bool) []string {
	t.Helper()
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range maps {
		if data || m.Prot&4 != 0 {
			want = append(want, mapLine(m))
		}
	}
	return want
}

// diffLines reports lines missing from got, extra in got, or doubled.
func diffLines(want, got []string) []string {
	var diff []string
	n := map[string]int{}
	for _, l := range got {
		if n[l]++; n[l] == 2 {
			diff = append(diff, "twice: "+l)
		}
	}
	w := map[string]bool{}
	for _, l := range want {
		w[l] = true
		if n[l] == 0 {
			diff = append(diff, "missing: "+l)
		}
	}
	for _, l := range got {
		if !w[l] {
			diff = append(diff, "extra: "+l)
		}
	}
	if len(diff) > 20 {
		diff = append(diff[:20], fmt.Sprintf("... %d more", len(diff)-20))
	}
	return diff
}

var lostChunksRE = regexp.MustCompile(`Warning:\s*Processed \d+ events and lost \d+ chunks!\s*Check IO/CPU overload!\s*`)

// noWarnings fails t when perf's stderr holds anything that looks like
// a complaint.
func noWarnings(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit status %d\n%s", what, r.code, r.stderr)
	}
	// perf's note of PERF_RECORD_LOST records in the file: on a busy
	// host the kernel drops live records, and synth marks them as perf
	// does. Anything else is a complaint.
	low := strings.ToLower(lostChunksRE.ReplaceAllString(r.stderr, ""))
	for _, bad := range []string{"warning", "error", "fail", "invalid", "unknown", "bad", "corrupt"} {
		if strings.Contains(low, bad) {
			t.Fatalf("%s: stderr says %q:\n%s", what, bad, r.stderr)
		}
	}
}
