package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// buildIDLines returns the "<hex> <name>" lines of perf buildid-list.
func buildIDLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return lines
}

var mmap2BuildIDRE = regexp.MustCompile(`PERF_RECORD_MMAP2 \d+/\d+: \[0x[0-9a-f]+\(0x[0-9a-f]+\) @ \S+ <([0-9a-f]+)>\]: \S+ (.*)$`)

// mmap2BuildIDs returns "<hex> <name>" for every MMAP2 record in build-ID
// form that perf printed.
func mmap2BuildIDs(out string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if m := mmap2BuildIDRE.FindStringSubmatch(l); m != nil {
			seen[m[1]+" "+m[2]] = true
		}
	}
	var lines []string
	for l := range seen {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return lines
}

// perf buildid-list lists every DSO of the dump with the build ID that
// perf script -D shows on its MMAP2 records; the pipe carries the same
// build IDs as PERF_RECORD_HEADER_BUILD_ID records.
func TestBuildIDsPerf(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	file := filepath.Join(t.TempDir(), "perf.data")
	r := runCmd(t, exec.Command(synthBin, "dump", "--data", "-o", file))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	sum := parseSummary(t, r.stderr)
	if !sum.hasBuildIDLine || sum.buildIDs == 0 || sum.buildIDs > sum.fileMappings || sum.cached+sum.idsRead == 0 {
		t.Errorf("summary %+v", sum)
	}
	list := exec.Command(perf, "buildid-list", "-i", file)
	list.Env = perfEnv(t)
	lr := runCmd(t, list)
	noWarnings(t, "perf buildid-list", lr)
	listed := buildIDLines(lr.stdout)

	script := exec.Command(perf, "script", "-D", "-i", file)
	script.Env = perfEnv(t)
	sr := runCmd(t, script)
	noWarnings(t, "perf script -D", sr)
	onRecords := mmap2BuildIDs(sr.stdout)
	if len(onRecords) == 0 {
		t.Fatal("perf script -D shows no MMAP2 record with a build id")
	}
	var user []string
	var vdso string
	modules := 0
	for _, l := range listed {
		switch {
		case strings.HasSuffix(l, " [vdso]"):
			vdso = l
		case strings.HasSuffix(l, " [kernel.kallsyms]"):
		case strings.HasSuffix(l, "]"): // a module, [name]
			modules++
		default:
			user = append(user, l)
		}
	}
	if loaded := loadedModules(t); modules != loaded {
		t.Errorf("perf buildid-list lists %d modules, /proc/modules %d", modules, loaded)
	}
	// [vdso] is listed with the build ID perf itself lists for it.
	perfFile := filepath.Join(t.TempDir(), "perf-own.data")
	perfRecordHost(t, perfFile, "--buildid-all")
	own := exec.Command(perf, "buildid-list", "-i", perfFile)
	own.Env = perfEnv(t)
	var perfVDSO string
	for _, l := range buildIDLines(runCmd(t, own).stdout) {
		if strings.HasSuffix(l, " [vdso]") {
			perfVDSO = l
		}
	}
	if vdso == "" || vdso != perfVDSO {
		t.Errorf("[vdso] build ID %q, perf lists %q", vdso, perfVDSO)
	}
	if strings.Join(user, "\n") != strings.Join(onRecords, "\n") {
		t.Errorf("perf buildid-list:\n%s\nMMAP2 records:\n%s", strings.Join(user, "\n"), strings.Join(onRecords, "\n"))
	}
	if len(user) == len(listed) {
		t.Error("perf buildid-list lists no kernel build id")
	}

	// Pipe mode: perf buildid-list lists a pipe's DSOs only when samples
	// hit them, so count the build-ID records perf reads instead.
	synth := exec.Command(synthBin, "dump", "--data")
	report := exec.Command(perf, "report", "-D", "-i", "-")
	report.Env = perfEnv(t)
	pipe, err := synth.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	report.Stdin = pipe
	if err := synth.Start(); err != nil {
		t.Fatal(err)
	}
	rr := runCmd(t, report)
	if err := synth.Wait(); err != nil {
		t.Fatal(err)
	}
	noWarnings(t, "perf report -D (pipe)", rr)
	m := regexp.MustCompile(`BUILD_ID events: +(\d+) `).FindStringSubmatch(rr.stdout)
	if m == nil {
		t.Fatal("perf report -D counts no BUILD_ID events in the pipe")
	}
	// The pipe is another dump, of a host where perf report now runs:
	// compare it with itself, one record per DSO plus the kernel's and
	// the vDSO's.
	pipeIDs := mmap2BuildIDs(rr.stdout)
	if n, _ := strconv.Atoi(m[1]); n != len(pipeIDs)+2+modules || len(pipeIDs) == 0 {
		t.Errorf("pipe: %d BUILD_ID records for %d DSOs with build ids (+1 kernel, +1 vDSO, +%d modules)", n, len(pipeIDs), modules)
	}
	for _, l := range pipeIDs {
		id, _, _ := strings.Cut(l, " ")
		if !strings.Contains(rr.stdout, rawBytes(id)) {
			t.Errorf("pipe: no BUILD_ID record holds %s", l)
		}
	}
}

// --no-buildid: maj/min/ino everywhere, no build-ID line.
func TestNoBuildID(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	file := filepath.Join(t.TempDir(), "perf.data")
	r := runCmd(t, exec.Command(synthBin, "dump", "--no-buildid", "-o", file))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if sum := parseSummary(t, r.stderr); sum.hasBuildIDLine {
		t.Errorf("build-ID line with --no-buildid: %q", r.stderr)
	}
	script := exec.Command(perf, "script", "-D", "-i", file)
	script.Env = perfEnv(t)
	sr := runCmd(t, script)
	noWarnings(t, "perf script -D", sr)
	if ids := mmap2BuildIDs(sr.stdout); len(ids) != 0 {
		t.Errorf("--no-buildid: MMAP2 records with build ids: %v", ids[:min(3, len(ids))])
	}
	if !strings.Contains(sr.stdout, "PERF_RECORD_MMAP2") {
		t.Error("no MMAP2 records")
	}
}

// rawBytes renders the first 4 bytes of a hex build ID as perf report -D
// prints a record's raw bytes: at offset 0xc of its first line.
func rawBytes(id string) string {
	var b strings.Builder
	for i := 0; i+2 <= 8 && i+2 <= len(id); i += 2 {
		b.WriteString(" " + id[i:i+2])
	}
	return "ff ff ff ff" + b.String() + "  "
}

// loadedModules counts the kernel's loaded modules, each of which has a
// build ID (they are linked with --build-id).
func loadedModules(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/modules")
	if errors.Is(err, fs.ErrNotExist) {
		return 0 // a kernel built without modules
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}
