package synth_test

import (
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
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
	testenv.Perf(t)
	file := filepath.Join(t.TempDir(), "perf.data")
	st := writeDump(t, file, synth.MethodAuto, synth.MethodOptions{Options: synth.Options{Data: true}})
	if st.BuildIDMappings == 0 || st.BuildIDMappings > st.FileMappings || st.Cached+st.BuildIDsRead == 0 {
		t.Errorf("build IDs: %d of %d file-backed mappings; %d files in the cache; read now: %d files, %d with a build ID",
			st.BuildIDMappings, st.FileMappings, st.Cached, st.FilesRead, st.BuildIDsRead)
	}
	lr := perftest.Run(t, perftest.Command(t, "buildid-list", "-i", file))
	perftest.NoWarnings(t, "perf buildid-list", lr)
	listed := buildIDLines(lr.Stdout)

	sr := perftest.Run(t, perftest.Command(t, "script", "-D", "-i", file))
	perftest.NoWarnings(t, "perf script -D", sr)
	onRecords := mmap2BuildIDs(sr.Stdout)
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
	perftest.RecordHost(t, perfFile, "--buildid-all")
	var perfVDSO string
	for _, l := range buildIDLines(perftest.Run(t, perftest.Command(t, "buildid-list", "-i", perfFile)).Stdout) {
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
	report := perftest.Command(t, "report", "-D", "-i", "-")
	var wait func() error
	report.Stdin, wait = piped(t, func(w io.Writer) error {
		_, err := dumpTo(w, synth.MethodAuto, synth.MethodOptions{Options: synth.Options{Data: true}}, synth.WriteOptions{})
		return err
	})
	rr := perftest.Run(t, report)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	perftest.NoWarnings(t, "perf report -D (pipe)", rr)
	m := regexp.MustCompile(`BUILD_ID events: +(\d+) `).FindStringSubmatch(rr.Stdout)
	if m == nil {
		t.Fatal("perf report -D counts no BUILD_ID events in the pipe")
	}
	// The pipe is another dump, of a host where perf report now runs:
	// compare it with itself, one record per DSO plus the kernel's and
	// the vDSO's.
	pipeIDs := mmap2BuildIDs(rr.Stdout)
	if n, _ := strconv.Atoi(m[1]); n != len(pipeIDs)+2+modules || len(pipeIDs) == 0 {
		t.Errorf("pipe: %d BUILD_ID records for %d DSOs with build ids (+1 kernel, +1 vDSO, +%d modules)", n, len(pipeIDs), modules)
	}
	for _, l := range pipeIDs {
		id, _, _ := strings.Cut(l, " ")
		if !strings.Contains(rr.Stdout, rawBytes(id)) {
			t.Errorf("pipe: no BUILD_ID record holds %s", l)
		}
	}
}

// Options.NoBuildID: maj/min/ino everywhere.
func TestNoBuildID(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	file := filepath.Join(t.TempDir(), "perf.data")
	writeDump(t, file, synth.MethodAuto, synth.MethodOptions{Options: synth.Options{NoBuildID: true}})
	sr := perftest.Run(t, perftest.Command(t, "script", "-D", "-i", file))
	perftest.NoWarnings(t, "perf script -D", sr)
	if ids := mmap2BuildIDs(sr.Stdout); len(ids) != 0 {
		t.Errorf("NoBuildID: MMAP2 records with build ids: %v", ids[:min(3, len(ids))])
	}
	if !strings.Contains(sr.Stdout, "PERF_RECORD_MMAP2") {
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
