// Package bench runs every synthesis method side by side on one host,
// each run in its own process (so peak RSS is per method), interleaved,
// and summarizes the runs: the engine of `synth bench`.
package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config says what to run.
type Config struct {
	Synth    string    // the synth binary whose dump command runs each method
	Perf     string    // perf, or "" to leave perf's synthesis out
	Reps     int       // runs per method (0: 5)
	Threads  int       // procmaps runs with 1..Threads workers (0: one per CPU)
	Progress io.Writer // a progress line, rewritten in place; nil: none
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
}

// method is one way to run a synthesis.
type method struct {
	name string
	cmd  func() *exec.Cmd
	// parse reads the run's time, mappings and records from its output.
	parse func(stdout, stderr string) (time.Duration, int, int, error)
}

func (c *Config) methods() []method {
	dump := func(args ...string) func() *exec.Cmd {
		return func() *exec.Cmd {
			return exec.Command(c.Synth, append([]string{"dump", "--no-kernel", "-o", "/dev/null"}, args...)...)
		}
	}
	// bpf is a warm dump (the second in its process: the build-ID
	// cache filled), as a profiler's repeated dumps are; bpf-cold is
	// the first dump of a fresh process.
	ms := []method{
		{"bpf", dump("--method", "bpf", "--warmup", "1"), parseSynth},
		{"bpf-cold", dump("--method", "bpf"), parseSynth},
		{"bpf-iter", dump("--method", "bpf", "--walk", "iter", "--warmup", "1"), parseSynth},
		{"bpf-nobuildid", dump("--method", "bpf", "--no-buildid", "--warmup", "1"), parseSynth},
		{"bpf-nolive", dump("--method", "bpf", "--no-live", "--warmup", "1"), parseSynth},
	}
	for n := 1; n <= c.Threads; n++ {
		ms = append(ms, method{fmt.Sprintf("procmaps-%d", n), dump("--method", "procmaps", "--threads", strconv.Itoa(n)), parseSynth})
	}
	ms = append(ms,
		method{"procquery", dump("--method", "procquery", "--threads", strconv.Itoa(c.Threads)), parseSynth},
		method{"floor-maple", dump("--method", "floor", "--walk", "maple"), parseSynth},
		method{"floor-iter", dump("--method", "floor", "--walk", "iter"), parseSynth})
	if c.Perf != "" {
		perf := func(n int) func() *exec.Cmd {
			return func() *exec.Cmd {
				return exec.Command(c.Perf, "bench", "internals", "synthesize", "--mt",
					"-m", strconv.Itoa(n), "-M", strconv.Itoa(n), "-I", "1")
			}
		}
		ms = append(ms, method{"perf-st", perf(1), parsePerf}, method{"perf-mt", perf(c.Threads), parsePerf})
	}
	return ms
}

// run is one run's measurements.
type run struct {
	d                 time.Duration
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
	ms := c.methods()
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
	cmd := m.cmd()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return run{}, err
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	stop()
	if err != nil {
		return run{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	d, mappings, records, err := m.parse(stdout.String(), stderr.String())
	if err != nil {
		return run{}, err
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10 // KiB
	}
	return run{d: d, mappings: mappings, records: records, rss: rss}, nil
}

var (
	synthRE = regexp.MustCompile(`synth: method \w+: \d+ processes, (\d+) mappings, (\d+) records, \d+ lost, (\S+) \(`)
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
		var rss int64
		for j, r := range runs[i] {
			ds[j] = int64(r.d)
			rss = max(rss, r.rss)
		}
		slices.Sort(ds)
		last := runs[i][len(runs[i])-1]
		res[i] = Result{Name: m.name, MedianNs: ds[len(ds)/2], MinNs: ds[0], MaxNs: ds[len(ds)-1],
			Mappings: last.mappings, Records: last.records, PeakRSSBytes: rss}
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
