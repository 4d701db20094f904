package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/synth-dev/synth/cmd/synth/internal/bench"
	"github.com/synth-dev/synth/cmd/synth/internal/loadgen"
)

// vmasPerProc is how many VMAs each load process of a sweep makes.
const vmasPerProc = 10000

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cl := newCmdLine("bench", "[options]")
	fs := cl.fs
	var (
		reps    = fs.Int("reps", 5, "runs per method")
		threads = fs.Int("threads", 0, "procmaps and procquery run with 1..`n` workers (default: one per CPU)")
		asJSON  = fs.Bool("json", false, "print JSON instead of a table")
		sweep   = fs.String("sweep", "", "measure with load processes adding these VMA `counts` (e.g. 10k,100k,500k)")
		svg     = fs.String("svg", "bench.svg", "with --sweep, plot time against VMAs into this `file`")
		noPerf  = fs.Bool("no-perf", false, "leave perf's own synthesis out")
	)
	if code, ok := cl.parse(args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return cl.usageError(stderr, "unexpected argument %q", fs.Arg(0))
	}
	sizes, err := parseSizes(*sweep)
	if err != nil {
		return cl.usageError(stderr, "--sweep: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fail(stderr, err)
	}
	cfg := bench.Config{Synth: self, Reps: *reps, Threads: *threads, Progress: stderr}
	if p, err := exec.LookPath("perf"); err == nil && !*noPerf {
		cfg.Perf = p
	}
	cfg.Skip = bench.Unavailable(stderr)
	var pts []bench.Point
	for _, size := range sizes {
		pt, err := measure(ctx, cfg, size, stderr)
		if err != nil {
			return fail(stderr, err)
		}
		pts = append(pts, pt)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		type size struct {
			Host    bench.Host     `json:"host"`
			Methods []bench.Result `json:"methods"`
		}
		out := make([]size, len(pts))
		for i, pt := range pts {
			out[i] = size{pt.Host, pt.Results}
		}
		if len(out) == 1 {
			err = enc.Encode(out[0])
		} else {
			err = enc.Encode(out) // one object per size of the sweep
		}
	} else {
		for _, pt := range pts {
			if err = bench.WriteTable(stdout, pt.Host, pt.Results); err != nil {
				break
			}
		}
	}
	if err == nil && *sweep != "" {
		err = bench.WriteSVG(*svg, pts)
	}
	if err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// measure runs the methods with load processes adding about size VMAs.
func measure(ctx context.Context, cfg bench.Config, size int, stderr io.Writer) (bench.Point, error) {
	if size > 0 {
		fmt.Fprintf(stderr, "\rbench: starting load of %d VMAs", size)
		l, err := loadgen.Start((size+vmasPerProc-1)/vmasPerProc, min(size, vmasPerProc))
		if err != nil {
			return bench.Point{}, err
		}
		defer l.Stop()
	}
	host := bench.ReadHost()
	res, err := bench.Run(ctx, cfg, host.VMAs)
	return bench.Point{VMAs: host.VMAs, Host: host, Results: res}, err
}

// parseSizes reads "10k,100k,500k"; "" means the host as it is (0).
func parseSizes(s string) ([]int, error) {
	if s == "" {
		return []int{0}, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		mult := 1
		if n, ok := strings.CutSuffix(strings.ToLower(f), "k"); ok {
			f, mult = n, 1000
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, v*mult)
	}
	return out, nil
}

// runLoadgen holds a load of VMAs until interrupted, for reproducing
// benchmarks by hand.
func runLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cl := newCmdLine("loadgen", "[options]")
	vmas := cl.fs.Int("vmas", 100000, "`VMAs` to add, in processes of 10,000")
	if code, ok := cl.parse(args, stdout, stderr); !ok {
		return code
	}
	if cl.fs.NArg() > 0 {
		return cl.usageError(stderr, "unexpected argument %q", cl.fs.Arg(0))
	}
	l, err := loadgen.Start((*vmas+vmasPerProc-1)/vmasPerProc, min(*vmas, vmasPerProc))
	if err != nil {
		return fail(stderr, err)
	}
	defer l.Stop()
	fmt.Fprintf(stdout, "synth: loadgen: %d VMAs in load processes; Ctrl-C to end\n", l.VMAs)
	<-ctx.Done()
	return exitOK
}
