package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synth-dev/synth/perfdata"
)

// Config says what to run.
type Config struct {
	Synth    string    // the synth binary: its dump command runs each method, and it runs the floors (package floor)
	Perf     string    // perf, or "" to leave perf's synthesis out
	Reps     int       // runs per method (0: 5)
	Threads  int       // procmaps and procquery run with 1..Threads workers (0: one per CPU)
	Progress io.Writer // a progress line, rewritten in place; nil: none
	// Skip are the methods this kernel cannot run, each a name or the
	// name before "-N" (procquery without PROCMAP_QUERY; floor-maple
	// where the maple walk cannot prove itself).
	Skip []string
}

// Result is one method's summary. The JSON names are synth bench --json's.
type Result struct {
	Name         string  `json:"name"`
	MedianNs     int64   `json:"median_ns"`
	MinNs        int64   `json:"min_ns"`
	MaxNs        int64   `json:"max_ns"`
	Mappings     int     `json:"mappings"`
	Records      int     `json:"records"`
	NsPerMapping float64 `json:"ns_per_mapping"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	RatioToBPF   float64 `json:"ratio_to_bpf"`
	// CPUNs is the median user+system time of the whole process.
	CPUNs int64 `json:"cpu_ns"`
}

// method is one way to run a synthesis.
type method struct {
	name string
	cmd  func() *exec.Cmd
	// parse reads the run's time, mappings and records from its output.
	parse func(stdout, stderr string) (time.Duration, int, int, error)
	// base, if set, is cmd without the synthesis: the method's time is
	// cmd's wall time less base's, run right before it, and parse's
	// time is not used.
	base func() *exec.Cmd
	// whole: the method's time is cmd's wall time, all of it (the
	// whole-command rows), and parse's time is not used.
	whole bool
}

func (c *Config) methods(tmp string) []method {
	dump := func(args ...string) func() *exec.Cmd {
		return func() *exec.Cmd {
			return exec.Command(c.Synth, append([]string{"dump", "--no-kernel", "-o", "/dev/null"}, args...)...)
		}
	}
	// bpf is a warm dump (the second in its process: the build-ID
	// cache filled), as a profiler's repeated dumps are; bpf-cold is
	// the first dump of a fresh process.
	ms := []method{
		{name: "bpf", cmd: dump("--method", "bpf", "--warmup", "1"), parse: parseSynth},
		{name: "bpf-cold", cmd: dump("--method", "bpf"), parse: parseSynth},
		{name: "bpf-iter", cmd: dump("--method", "bpf", "--walk", "iter", "--warmup", "1"), parse: parseSynth},
		{name: "bpf-nobuildid", cmd: dump("--method", "bpf", "--no-buildid", "--warmup", "1"), parse: parseSynth},
		{name: "bpf-nolive", cmd: dump("--method", "bpf", "--no-live", "--warmup", "1"), parse: parseSynth},
	}
	for _, name := range []string{"procmaps", "procquery"} {
		for n := 1; n <= c.Threads; n++ {
			ms = append(ms, method{name: fmt.Sprintf("%s-%d", name, n),
				cmd: dump("--method", name, "--threads", strconv.Itoa(n)), parse: parseSynth})
		}
	}
	ms = append(ms, c.floors()...)
	ms = slices.DeleteFunc(ms, func(m method) bool {
		return slices.ContainsFunc(c.Skip, func(s string) bool { return m.name == s || strings.HasPrefix(m.name, s+"-") })
	})
	if c.Perf != "" {
		perf := func(n int) func() *exec.Cmd {
			return func() *exec.Cmd {
				return exec.Command(c.Perf, "bench", "internals", "synthesize", "--mt",
					"-m", strconv.Itoa(n), "-M", strconv.Itoa(n), "-I", "1")
			}
		}
		ms = append(ms, method{name: "perf-st", cmd: perf(1), parse: parsePerf},
			method{name: "perf-mt", cmd: perf(c.Threads), parse: parsePerf},
			c.perfBuildID(filepath.Join(tmp, "perf-buildid.data")))
	}
	return append(ms, c.wholeCommands(tmp)...)
}

// wholeCommands are the rows a user timing one command against another
// sees: a fresh process from exec to exit, loading included, writing a
// perf.data of the whole host (kernel maps and BPF programs too). synth
// dump with build IDs (whole-synth), without (whole-synth-nobuildid),
// and with its programs linked against the kernel's BTF instead of
// loaded from the kernel cache (whole-synth-nobtfcache: what a kernel's
// first run pays, less the store), against perf record's synthesis-only run (whole-perf) and that run
// with build IDs read from the files (whole-perf-buildid). perf runs
// with --no-bpf-event, as its side-band thread would add a one-second
// poll at its end; synth leaves the BPF events out likewise.
func (c *Config) wholeCommands(tmp string) []method {
	synth := func(name string, args ...string) method {
		out := filepath.Join(tmp, name+".data")
		return method{name: name, whole: true, cmd: func() *exec.Cmd {
			return exec.Command(c.Synth, append([]string{"dump", "--no-bpf-event", "-o", out}, args...)...)
		}, parse: func(string, string) (time.Duration, int, int, error) { return countRecords(out) }}
	}
	ms := []method{synth("whole-synth"), synth("whole-synth-nobuildid", "--no-buildid"),
		synth("whole-synth-nobtfcache", "--no-kernel-cache")}
	if c.Perf == "" {
		return ms
	}
	perf := func(name string, args ...string) method {
		out := filepath.Join(tmp, name+".data")
		return method{name: name, whole: true, cmd: func() *exec.Cmd {
			return exec.Command(c.Perf, append(append([]string{"record", "-q", "-a", "-e", "dummy", "--no-bpf-event",
				"--synth=all", "-o", out}, args...), "--", "true")...)
		}, parse: func(string, string) (time.Duration, int, int, error) { return countRecords(out) }}
	}
	return append(ms, perf("whole-perf"), perf("whole-perf-buildid", "--buildid-mmap"))
}

// perfBuildID is perf's synthesis as perf record does it by default
// today, build IDs read from each file (--buildid-mmap): perf record -a
// of the dummy event around /bin/true, with its synthesis (--synth=mmap)
// less without it (--synth=no). --no-bpf-event keeps perf's side-band
// thread out: stopping it waits out a one-second poll, which would hide
// the synthesis in both runs. A difference below 0, within the noise of
// perf record's start-up on a small host, counts as 0.
func (c *Config) perfBuildID(out string) method {
	record := func(synth string) func() *exec.Cmd {
		return func() *exec.Cmd {
			return exec.Command(c.Perf, "record", "-q", "-a", "-e", "dummy", "--no-bpf-event",
				"--buildid-mmap", "--synth="+synth, "-o", out, "--", "true")
		}
	}
	return method{name: "perf-buildid", cmd: record("mmap"), base: record("no"),
		parse: func(string, string) (time.Duration, int, int, error) { return countRecords(out) }}
}

// countRecords counts the MMAP2 records, and all records, of a perf.data.
func countRecords(path string) (time.Duration, int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, 0, err
	}
	rd, err := perfdata.NewReader(f, fi.Size())
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	var maps, recs int
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return 0, maps, recs, nil
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		recs++
		if rec.Type == perfdata.RecordMmap2 {
			maps++
		}
	}
}

// run is one run's measurements.
type run struct {
	d, cpu            time.Duration
	mappings, records int
	rss               int64
}

// Run measures every method Reps times, interleaved. NsPerMapping
// divides by vmas, the VMAs on the host, for every method alike: each
// walks all of them, whatever it writes.
func Run(ctx context.Context, c Config, vmas int) ([]Result, error) {
	if c.Reps <= 0 {
		c.Reps = 5
	}
	if c.Threads <= 0 {
		c.Threads = runtime.NumCPU()
	}
	tmp, err := os.MkdirTemp("", "synth-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ms := c.methods(tmp)
	runs := make([][]run, len(ms))
	for rep := range c.Reps {
		for i, m := range ms {
			if c.Progress != nil {
				fmt.Fprintf(c.Progress, "\rbench: run %d/%d %-16s", rep+1, c.Reps, m.name)
			}
			r, err := runOnce(ctx, m)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.name, err)
			}
			runs[i] = append(runs[i], r)
		}
	}
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "\r%40s\r", "")
	}
	return summarize(ms, runs, vmas), nil
}

func runOnce(ctx context.Context, m method) (run, error) {
	var base time.Duration
	if m.base != nil {
		var err error
		if _, _, base, err = runCmd(ctx, m.base()); err != nil {
			return run{}, err
		}
	}
	cmd := m.cmd()
	stdout, stderr, wall, err := runCmd(ctx, cmd)
	if err != nil {
		return run{}, err
	}
	d, mappings, records, err := m.parse(stdout, stderr)
	if err != nil {
		return run{}, err
	}
	if m.base != nil {
		d = max(wall-base, 0)
	}
	if m.whole {
		d = wall
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10 // KiB
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return run{d: d, mappings: mappings, records: records, rss: rss, cpu: cpu}, nil
}

// runCmd runs cmd to its end and returns its output and wall time.
func runCmd(ctx context.Context, cmd *exec.Cmd) (stdout, stderr string, wall time.Duration, err error) {
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", "", 0, err
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	err = cmd.Wait()
	wall = time.Since(start)
	stop()
	if err != nil {
		return "", "", 0, fmt.Errorf("%v: %s", err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), wall, nil
}

var (
	synthRE = regexp.MustCompile(`synth: method \w+(?: \(walk \w+\))?: \d+ processes, (\d+) mappings, (\d+) records, \d+ lost, (\S+) \(`)
	perfRE  = regexp.MustCompile(`(?s)Average synthesis took: ([\d.]+) usec.*?Average num. events: ([\d.]+)`)
)

// parseSynth reads synth's summary: the dump's own time, without loading.
func parseSynth(_, stderr string) (time.Duration, int, int, error) {
	m := synthRE.FindStringSubmatch(stderr)
	if m == nil {
		return 0, 0, 0, fmt.Errorf("no summary in %q", stderr)
	}
	d, err := time.ParseDuration(m[3])
	maps, _ := strconv.Atoi(m[1])
	recs, _ := strconv.Atoi(m[2])
	return d, maps, recs, err
}

// parsePerf reads perf bench's average synthesis time and event count;
// perf does not count mappings apart, so events stand for both.
func parsePerf(stdout, _ string) (time.Duration, int, int, error) {
	m := perfRE.FindStringSubmatch(stdout)
	if m == nil {
		return 0, 0, 0, fmt.Errorf("no result in %q", stdout)
	}
	us, err := strconv.ParseFloat(m[1], 64)
	ev, _ := strconv.ParseFloat(m[2], 64)
	return time.Duration(us * float64(time.Microsecond)), int(ev), int(ev), err
}

func summarize(ms []method, runs [][]run, vmas int) []Result {
	res := make([]Result, len(ms))
	for i, m := range ms {
		ds := make([]int64, len(runs[i]))
		cpus := make([]int64, len(runs[i]))
		var rss int64
		for j, r := range runs[i] {
			ds[j], cpus[j] = int64(r.d), int64(r.cpu)
			rss = max(rss, r.rss)
		}
		slices.Sort(ds)
		slices.Sort(cpus)
		last := runs[i][len(runs[i])-1]
		res[i] = Result{Name: m.name, MedianNs: ds[len(ds)/2], MinNs: ds[0], MaxNs: ds[len(ds)-1],
			Mappings: last.mappings, Records: last.records, PeakRSSBytes: rss, CPUNs: cpus[len(cpus)/2]}
		if vmas > 0 {
			res[i].NsPerMapping = float64(res[i].MedianNs) / float64(vmas)
		}
	}
	for i := range res {
		if res[0].MedianNs > 0 {
			res[i].RatioToBPF = float64(res[i].MedianNs) / float64(res[0].MedianNs)
		}
	}
	return res
}
