package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

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
