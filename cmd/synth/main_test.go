package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/synth-dev/synth/cmd/synth/internal/loadgen"
	"github.com/synth-dev/synth/cmd/synth/internal/workload"

	"github.com/synth-dev/synth/internal/perftest"
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
	r := perftest.Run(t, cmd)
	return result{r.Code, r.Stdout, r.Stderr}
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

// noWarnings fails t when perf's stderr holds anything that looks like
// a complaint (perftest.NoWarnings).
func noWarnings(t *testing.T, what string, r result) {
	t.Helper()
	perftest.NoWarnings(t, what, perftest.Result{Code: r.code, Stdout: r.stdout, Stderr: r.stderr})
}

// dieWithTest is the SysProcAttr of a helper process that would run on
// for ever (a spinner, synth loadgen): it is killed when the test binary
// dies, so that a test run stopped by a signal or go test's timeout,
// whose Cleanups never run, leaves no busy loop behind.
func dieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
