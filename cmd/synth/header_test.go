package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// missingFeatures runs perf report --header-only on file and returns the
// features perf lists as missing.
func missingFeatures(t *testing.T, perf, file string) []string {
	t.Helper()
	cmd := exec.Command(perf, "report", "--header-only", "-I", "-i", file)
	cmd.Env = perfEnv(t)
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("perf report --header-only %s: exit %d: %s", file, r.code, r.stderr)
	}
	noWarnings(t, "perf report --header-only", r)
	// Readers map a record to its attr on the assumption that every
	// attr of a file has one sample_type, as perf writes them.
	types := regexp.MustCompile(`(?m)^# event : .*, sample_type = (\S+),`).FindAllStringSubmatch(r.stdout, -1)
	if len(types) == 0 {
		t.Errorf("%s: no attr with a sample_type:\n%s", file, r.stdout)
	}
	for _, st := range types {
		if st[1] != types[0][1] {
			t.Errorf("%s: attrs with sample_type %s and %s", file, types[0][1], st[1])
		}
	}
	m := regexp.MustCompile(`(?m)^# missing features: (.*)$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("perf report --header-only %s: no missing-features line:\n%s", file, r.stdout)
	}
	return strings.Fields(m[1])
}

// The header of every file synth writes holds what perf record -k
// CLOCK_MONOTONIC writes on the same host, section for section: perf
// lists the same features as missing for both; all attrs of a file have
// one sample_type (see missingFeatures). And perf data convert
// --to-json, which crashes on a file without CPUDESC, converts them.
func TestHeaderAsPerf(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	dir := t.TempDir()
	ref := filepath.Join(dir, "perf.data")
	perfRecordHost(t, ref)
	want := missingFeatures(t, perf, ref)
	for _, args := range [][]string{
		{"dump"},
		{"dump", "--data"},
		{"record", "-g", "--", "sleep", "0.3"},
	} {
		name := strings.Join(args, " ")
		file := filepath.Join(dir, strconv.Itoa(len(name))+".data")
		cmd := exec.Command(synthBin, append([]string{args[0], "-o", file}, args[1:]...)...)
		if r := runCmd(t, cmd); r.code != 0 {
			t.Fatalf("synth %s: exit %d: %s", name, r.code, r.stderr)
		}
		if got := missingFeatures(t, perf, file); !slices.Equal(got, want) {
			t.Errorf("synth %s: perf lists %v as missing, for perf record's own file %v", name, got, want)
		}
		checkConvert(t, perf, name, file)
	}
}

// perfRecordHost writes perf's own recording of the host's state to
// path: perf record -a -e dummy -k CLOCK_MONOTONIC, with extra flags.
func perfRecordHost(t *testing.T, path string, extra ...string) {
	t.Helper()
	args := append([]string{"record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "dummy", "-a", "-o", path}, extra...)
	rec := exec.Command(testenv.Perf(t), append(args, "--", "true")...)
	rec.Env = perfEnv(t)
	if r := runCmd(t, rec); r.code != 0 {
		t.Fatalf("perf record: exit %d: %s", r.code, r.stderr)
	}
}

// checkConvert converts file to JSON with perf data convert and checks
// that it worked, and that the JSON carries the host's description.
func checkConvert(t *testing.T, perf, name, file string) {
	t.Helper()
	js := file + ".json"
	cmd := exec.Command(perf, "data", "convert", "--to-json", js, "-i", file)
	cmd.Env = perfEnv(t)
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("synth %s: perf data convert --to-json: exit %d: %s", name, r.code, r.stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Headers map[string]any `json:"headers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("synth %s: perf data convert wrote no JSON: %v", name, err)
	}
	for _, key := range []string{"cpu-desc", "cpuid", "clockid", "clock-time"} {
		if _, ok := doc.Headers[key]; !ok {
			t.Errorf("synth %s: perf data convert: no %q in the headers %v", name, key, doc.Headers)
		}
	}
}

// A recording's SAMPLE_TIME is the span of its samples, in the
// samples' clock.
func TestRecordSampleTime(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	spin := buildSpin(t)
	file := filepath.Join(t.TempDir(), "perf.data")
	// A sleeping command is sampled only as it starts and exits, and
	// its exit may go unsampled; spin is on the CPU for the whole span.
	checkRecordExit(t, runCmd(t, exec.Command(synthBin, "record", "-o", file, "--", "timeout", "0.5", spin)), 124)
	cmd := exec.Command(perf, "report", "--header-only", "-i", file)
	cmd.Env = perfEnv(t)
	r := runCmd(t, cmd)
	first := regexp.MustCompile(`time of first sample : ([\d.]+)`).FindStringSubmatch(r.stdout)
	last := regexp.MustCompile(`time of last sample : ([\d.]+)`).FindStringSubmatch(r.stdout)
	if first == nil || last == nil {
		t.Fatalf("perf report --header-only: no sample times:\n%s", r.stdout)
	}
	f, _ := strconv.ParseFloat(first[1], 64)
	l, _ := strconv.ParseFloat(last[1], 64)
	// perf script's first and last sample times are the oracle.
	script := exec.Command(perf, "script", "-F", "time", "-i", file)
	script.Env = perfEnv(t)
	times := strings.Fields(strings.ReplaceAll(runCmd(t, script).stdout, ":", ""))
	if len(times) < 2 {
		t.Fatalf("perf script shows %d samples", len(times))
	}
	sf, _ := strconv.ParseFloat(times[0], 64)
	sl, _ := strconv.ParseFloat(times[len(times)-1], 64)
	if f != sf || l != sl || l-f < 0.2 {
		t.Errorf("header says samples from %v to %v; perf script shows %v to %v", f, l, sf, sl)
	}
}

// recordTypes lists the records of file in file order, as perf report
// -D reads them: their offsets and PERF_RECORD_* names.
func recordTypes(t *testing.T, perf, file string) []string {
	t.Helper()
	cmd := exec.Command(perf, "report", "-D", "-i", file)
	cmd.Env = perfEnv(t)
	r := runCmd(t, cmd)
	type rec struct {
		off  uint64
		name string
	}
	var recs []rec
	re := regexp.MustCompile(`(?m)^(?:\S+ )*?(0x[0-9a-f]+) \[0x[0-9a-f]+\]: PERF_RECORD_([A-Z_0-9]+)`)
	for _, m := range re.FindAllStringSubmatch(r.stdout, -1) {
		off, _ := strconv.ParseUint(m[1], 0, 64)
		recs = append(recs, rec{off, m[2]})
	}
	slices.SortFunc(recs, func(a, b rec) int { return int(a.off) - int(b.off) })
	var names []string
	for _, r := range recs {
		names = append(names, r.name)
	}
	return names
}

// synth record ends its initial state with FINISHED_INIT, before any
// sample, and its passes over the rings with FINISHED_ROUND, the last
// one ending the file, as perf record does; synth dump's file, all
// initial state, ends with FINISHED_INIT.
func TestFinishedInitAndRounds(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "record.data")
	if r := runCmd(t, exec.Command(synthBin, "record", "-o", file, "--", "sleep", "0.5")); r.code != 0 {
		t.Fatalf("synth record: exit %d: %s", r.code, r.stderr)
	}
	names := recordTypes(t, perf, file)
	init := slices.Index(names, "FINISHED_INIT")
	if init < 0 || slices.Contains(names[init+1:], "FINISHED_INIT") {
		t.Fatalf("synth record: want one FINISHED_INIT, records: %v", names)
	}
	if i := slices.Index(names, "SAMPLE"); i < init {
		t.Errorf("synth record: a SAMPLE (record %d) before FINISHED_INIT (record %d)", i, init)
	}
	if !slices.Contains(names[init:], "SAMPLE") || names[len(names)-1] != "FINISHED_ROUND" {
		t.Errorf("synth record: want samples after FINISHED_INIT and a FINISHED_ROUND last, records after it: %v", names[init:])
	}
	if n := slices.Index(names, "COMM"); n < 0 || n > init {
		t.Errorf("synth record: no synthesized COMM before FINISHED_INIT: %v", names[:init])
	}

	file = filepath.Join(dir, "dump.data")
	if r := runCmd(t, exec.Command(synthBin, "dump", "-o", file)); r.code != 0 {
		t.Fatalf("synth dump: exit %d: %s", r.code, r.stderr)
	}
	names = recordTypes(t, perf, file)
	if len(names) < 2 || names[len(names)-1] != "FINISHED_INIT" || slices.Index(names, "FINISHED_INIT") != len(names)-1 {
		t.Errorf("synth dump: want one FINISHED_INIT, last; records end %v", names[max(len(names)-5, 0):])
	}
}
