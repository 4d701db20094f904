package bench

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseSynth(t *testing.T) {
	d, maps, recs, err := parseSynth("", "synth: using a fallback method because x\n"+
		"synth: method bpf: 71 processes, 47 mappings, 135 records, 0 lost, 950µs (68.9ms with loading)\n")
	if err != nil || d != 950*time.Microsecond || maps != 47 || recs != 135 {
		t.Errorf("%v %d %d %v", d, maps, recs, err)
	}
	if _, _, _, err := parseSynth("", "synth: bpf method: missing CAP_BPF\n"); err == nil {
		t.Error("no summary: no error")
	}
}

func TestParsePerf(t *testing.T) {
	out := `# Running 'internals/synthesize' benchmark:
Computing performance of multi threaded perf event synthesis by
synthesizing events on CPU 0:
  Number of synthesis threads: 1
    Average synthesis took: 1841.800 usec (+- 72.679 usec)
    Average num. events: 232.000 (+- 0.000)
    Average time per event 7.939 usec
`
	d, maps, _, err := parsePerf(out, "")
	if err != nil || d != 1841800*time.Nanosecond || maps != 232 {
		t.Errorf("%v %d %v", d, maps, err)
	}
}

func TestSummarize(t *testing.T) {
	ms := []method{{name: "bpf"}, {name: "procmaps-1"}}
	runs := [][]run{
		{{d: 3 * time.Millisecond, mappings: 10, rss: 5 << 20}, {d: 1 * time.Millisecond, mappings: 10}, {d: 2 * time.Millisecond, mappings: 10}},
		{{d: 8 * time.Millisecond, mappings: 10}, {d: 6 * time.Millisecond, mappings: 10, rss: 9 << 20}, {d: 4 * time.Millisecond, mappings: 10}},
	}
	res := summarize(ms, runs, 100)
	if r := res[0]; r.MedianNs != 2e6 || r.MinNs != 1e6 || r.MaxNs != 3e6 || r.PeakRSSBytes != 5<<20 || r.RatioToBPF != 1 || r.NsPerMapping != 2e4 {
		t.Errorf("bpf: %+v", r)
	}
	if r := res[1]; r.MedianNs != 6e6 || r.RatioToBPF != 3 || r.PeakRSSBytes != 9<<20 {
		t.Errorf("procmaps: %+v", r)
	}
}

func TestWriteSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.svg")
	pts := []Point{
		{VMAs: 10000, Results: []Result{{Name: "bpf", MedianNs: 1e6}, {Name: "perf-st", MedianNs: 2e6}}},
		{VMAs: 100000, Results: []Result{{Name: "bpf", MedianNs: 9e6}, {Name: "perf-st", MedianNs: 30e6}}},
	}
	if err := WriteSVG(path, pts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil {
		t.Errorf("not XML: %v", err)
	}
	if strings.Count(string(b), "<polyline") != 2 || !strings.Contains(string(b), ">perf-st<") {
		t.Errorf("want a line and a label per method:\n%s", b)
	}
}
