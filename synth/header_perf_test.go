package synth_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// missingFeatures runs perf report --header-only on file and returns the
// features perf lists as missing.
func missingFeatures(t *testing.T, file string) []string {
	t.Helper()
	r := perftest.Run(t, perftest.Command(t, "report", "--header-only", "-I", "-i", file))
	if r.Code != 0 {
		t.Fatalf("perf report --header-only %s: exit %d: %s", file, r.Code, r.Stderr)
	}
	perftest.NoWarnings(t, "perf report --header-only", r)
	// Readers map a record to its attr on the assumption that every
	// attr of a file has one sample_type, as perf writes them.
	types := regexp.MustCompile(`(?m)^# event : .*, sample_type = (\S+),`).FindAllStringSubmatch(r.Stdout, -1)
	if len(types) == 0 {
		t.Errorf("%s: no attr with a sample_type:\n%s", file, r.Stdout)
	}
	for _, st := range types {
		if st[1] != types[0][1] {
			t.Errorf("%s: attrs with sample_type %s and %s", file, types[0][1], st[1])
		}
	}
	m := regexp.MustCompile(`(?m)^# missing features: (.*)$`).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("perf report --header-only %s: no missing-features line:\n%s", file, r.Stdout)
	}
	return strings.Fields(m[1])
}

// The header of every file the library writes holds what perf record -k
// CLOCK_MONOTONIC writes on the same host, section for section: perf
// lists the same features as missing for both; all attrs of a file have
// one sample_type (see missingFeatures). And perf data convert
// --to-json, which crashes on a file without CPUDESC, converts them.
func TestHeaderAsPerf(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	dir := t.TempDir()
	ref := filepath.Join(dir, "perf.data")
	perftest.RecordHost(t, ref)
	want := missingFeatures(t, ref)
	spin := synth.Options{Target: synth.Target{Pids: []int{spinner(t, "while :; do :; done")}}}
	for i, w := range []libWrite{
		dumping("WritePerfData", synth.Options{}),
		dumping("WritePerfData, Data", synth.Options{Data: true}),
		profiling("Profile of a shell, Callchain", synth.ProfileOptions{Options: spin, Callchain: true}, 300*time.Millisecond),
	} {
		file := filepath.Join(dir, strconv.Itoa(i)+".data")
		writeFile(t, file, func(out io.Writer) error { return w.write(out, synth.WriteOptions{}) })
		if got := missingFeatures(t, file); !slices.Equal(got, want) {
			t.Errorf("%s: perf lists %v as missing, for perf record's own file %v", w.name, got, want)
		}
		checkConvert(t, w.name, file)
	}
}

// checkConvert converts file to JSON with perf data convert and checks
// that it worked, and that the JSON carries the host's description.
func checkConvert(t *testing.T, name, file string) {
	t.Helper()
	js := file + ".json"
	r := perftest.Run(t, perftest.Command(t, "data", "convert", "--to-json", js, "-i", file))
	if r.Code != 0 {
		t.Fatalf("%s: perf data convert --to-json: exit %d: %s", name, r.Code, r.Stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Headers map[string]any `json:"headers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: perf data convert wrote no JSON: %v", name, err)
	}
	for _, key := range []string{"cpu-desc", "cpuid", "clockid", "clock-time"} {
		if _, ok := doc.Headers[key]; !ok {
			t.Errorf("%s: perf data convert: no %q in the headers %v", name, key, doc.Headers)
		}
	}
}
