package bench

import (
	"context"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synth-dev/synth/perfdata"
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

// A method with a base takes its wall time less the base's.
func TestRunOnceBase(t *testing.T) {
	sleep := func(s string) func() *exec.Cmd { return func() *exec.Cmd { return exec.Command("sleep", s) } }
	m := method{name: "x", cmd: sleep("0.4"), base: sleep("0.1"),
		parse: func(string, string) (time.Duration, int, int, error) { return time.Hour, 3, 4, nil }}
	r, err := runOnce(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if r.d < 250*time.Millisecond || r.d > time.Second || r.mappings != 3 || r.records != 4 {
		t.Errorf("%+v, want about 300ms, 3 mappings, 4 records", r)
	}
}

// countRecords counts what a perf.data holds: here two MMAP2 records
// and a COMM, in file mode.
func TestCountRecords(t *testing.T) {
	const st = perfdata.SampleTID | perfdata.SampleTime
	path := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	attr := perfdata.Attr{Type: 1, Config: 9, SampleType: st, Flags: perfdata.AttrSampleIDAll | perfdata.AttrMmap2}
	w, err := perfdata.NewWriter(f, perfdata.WriterOptions{Attrs: []perfdata.EventAttr{{Attr: attr, Name: "dummy:u"}}})
	if err != nil {
		t.Fatal(err)
	}
	sid := &perfdata.SampleID{Pid: 42, Tid: 42}
	for _, addr := range []uint64{0x400000, 0x500000} {
		m := perfdata.Mmap2{Misc: perfdata.MiscUser, Pid: 42, Tid: 42, Addr: addr, Len: 0x1000, Prot: 5, Flags: 2, Filename: "/usr/bin/true"}
		w.WriteRecord(m.Append(nil, st, sid))
	}
	c := perfdata.Comm{Pid: 42, Tid: 42, Comm: "true"}
	w.WriteRecord(c.Append(nil, st, sid))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, maps, recs, err := countRecords(path); err != nil || maps != 2 || recs != 3 {
		t.Errorf("%d MMAP2 records of %d, %v; want 2 of 3", maps, recs, err)
	}
	if _, _, _, err := countRecords(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file: no error")
	}
}

// A kernel without PROCMAP_QUERY or the maple walk's proof runs the rest.
func TestSkip(t *testing.T) {
	c := Config{Synth: "synth", Threads: 2, Skip: []string{"procquery", "floor-maple"}}
	var names []string
	for _, m := range c.methods(t.TempDir()) {
		names = append(names, m.name)
	}
	for _, want := range []string{"bpf", "bpf-iter", "procmaps-1", "procmaps-2", "floor-iter"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s left out: %v", want, names)
		}
	}
	for _, gone := range []string{"procquery-1", "procquery-2", "floor-maple"} {
		if slices.Contains(names, gone) {
			t.Errorf("%s not left out: %v", gone, names)
		}
	}
}

// The host's description tells machines apart: the CPU model, and each
// vulnerability's mitigation as the kernel reports it.
func TestReadHostMachine(t *testing.T) {
	h := ReadHost()
	if runtime.GOARCH == "amd64" && h.CPUModel == "" {
		t.Error("no CPU model from /proc/cpuinfo")
	}
	ents, err := os.ReadDir("/sys/devices/system/cpu/vulnerabilities")
	if err == nil && len(h.Mitigations) != len(ents) {
		t.Errorf("%d mitigations read, %d in sysfs", len(h.Mitigations), len(ents))
	}
	if m, ok := h.Mitigations["meltdown"]; ok && strings.Contains(m, "PTI") != (h.pti() != "") {
		t.Errorf("meltdown %q, but the table says %q", m, h.pti())
	}
}
