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
	m := regexp.MustCompile(`(?m)^# missing features: (.*)$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("perf report --header-only %s: no missing-features line:\n%s", file, r.stdout)
	}
	return strings.Fields(m[1])
}

// The header of every file synth writes holds what perf record -k
// CLOCK_MONOTONIC writes on the same host, section for section: perf
// lists the same features as missing for both. And perf data convert
// --to-json, which crashes on a file without CPUDESC, converts them.
func TestHeaderAsPerf(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	dir := t.TempDir()
	ref := filepath.Join(dir, "perf.data")
	rec := exec.Command(perf, "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "dummy", "-a", "-o", ref, "--", "true")
	rec.Env = perfEnv(t)
	if r := runCmd(t, rec); r.code != 0 {
		t.Fatalf("perf record: exit %d: %s", r.code, r.stderr)
	}
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
	file := filepath.Join(t.TempDir(), "perf.data")
	if r := runCmd(t, exec.Command(synthBin, "record", "-o", file, "--", "sleep", "0.5")); r.code != 0 {
		t.Fatalf("synth record: exit %d: %s", r.code, r.stderr)
	}
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
