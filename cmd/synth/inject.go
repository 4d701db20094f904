package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

func runInject(ctx context.Context, args []string, stdin, stdout *os.File, stderr io.Writer) int {
	fs := flag.NewFlagSet("inject", flag.ContinueOnError)
	var (
		in        = fs.String("i", "-", "read perf's pipe from `FILE` (default: stdin)")
		out       = fs.String("o", "", "write perf.data to `FILE` (default: stdout; pipe mode unless it is a regular file)")
		noBuildID = fs.Bool("no-buildid", false, "identify files by maj/min/ino instead of build ID")
		bidWait   = fs.Duration("buildid-timeout", synth.DefaultBuildIDTimeout, "wait at most `DURATION` for the build IDs of files new to the cache")
		method    = fs.String("method", "auto", "`METHOD`: auto, bpf, procmaps or procquery")
		threads   = fs.Int("threads", 0, "worker threads of the /proc methods (default: one per CPU)")
		verbose   = fs.Bool("v", false, "print when perf's header came, when the method loaded and the dump began, and where the dump's time went")
		// The build-ID cache: -N skips it, --buildid-all takes every file.
		noBuildIDCache, buildIDAll bool
	)
	fs.BoolVar(&noBuildIDCache, "N", false, "do not put the files with samples in the build-ID cache (~/.debug)")
	fs.BoolVar(&noBuildIDCache, "no-buildid-cache", false, "same as -N")
	fs.BoolVar(&buildIDAll, "buildid-all", false, "put every file of the build-ID table in the build-ID cache, not only those with samples")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: perf record -k CLOCK_MONOTONIC --synth=no ... -o - | synth inject [-i FILE|-] [-o FILE|-]\n                  [--no-buildid] [--buildid-timeout D] [--method auto|bpf|procmaps|procquery] [--threads N] [-v]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "inject: unexpected argument %q", fs.Arg(0))
	}
	if !knownMethod(*method) {
		return usageError(stderr, "inject: unknown method %q (want auto, bpf, procmaps or procquery)", *method)
	}
	if *out == "" {
		if err := checkStdout(stdout); err != nil {
			return usageError(stderr, "inject: %v", err)
		}
	}
	input := stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			return fail(stderr, fmt.Errorf("open input: %w", err))
		}
		defer f.Close()
		input = f
	}
	opts := synth.InjectOptions{Method: *method, Threads: *threads, NoBuildID: *noBuildID, BuildIDTimeout: *bidWait,
		Fallback: func(method string, err error) {
			fmt.Fprintf(stderr, "synth: using a fallback method because %s: %v\n", method, err)
		}}
	if *out == "-" {
		opts.Mode = perfdata.ModePipe // as perf record -o -
	}
	w, closeOut, err := openOutput(*out, stdout, false)
	if err != nil {
		return fail(stderr, err)
	}
	// The method loads as Inject starts, before perf's header comes; a
	// perf record that failed, or was interrupted, before its header
	// leaves no output behind (no reader takes an empty file).
	stream := &countingReader{r: input}
	st, err := synth.Inject(ctx, stream, w, opts)
	if *verbose {
		printInjectTimes(stderr, st)
	}
	if cerr := closeOut(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil && stream.n == 0 {
		if *out != "" && *out != "-" {
			os.Remove(*out)
		}
		return fail(stderr, errors.New("read perf's stream: perf's stream ended before it began"))
	}
	if err != nil {
		return fail(stderr, err)
	}
	if st.BadBuildIDs > 0 {
		fmt.Fprintf(stderr, "synth: inject: warning: %d of perf's MMAP2 records had a build-ID bit perf would misread (the kernel's, or a size over 20): passed on without it\n", st.BadBuildIDs)
	}
	fillBuildIDCache(stderr, *out, noBuildIDCache, buildIDAll)
	fmt.Fprintf(stderr, "synth: inject: method %s: %d processes, %d synthesized records written, %d left out as perf reported them first, dump %v; %d of perf's records\n",
		st.Dump.Method, st.Dump.Processes, st.Written, st.Dropped, st.Dump.Elapsed.Round(10*time.Microsecond), st.Perf)
	return exitOK
}

// printInjectTimes prints, from when synth inject began, when perf's
// header came, when the method loaded and when the dump began: the gap
// between perf's first sample and the dump's read is where a process
// that came and went is missed.
func printInjectTimes(stderr io.Writer, st synth.InjectStats) {
	t := st.Times
	at := func(ns uint64) string {
		if ns == 0 {
			return "-"
		}
		return fmt.Sprintf("%+.1f ms", (float64(ns)-float64(t.Start))/1e6)
	}
	fmt.Fprintf(stderr, "synth: inject: time: perf's header %s, method loaded %s to %s, dump began %s, perf's first sample %s\n",
		at(t.Header), at(t.LoadStart), at(t.Loaded), at(t.Dump), at(t.FirstSample))
	if t.Dump != 0 && t.FirstSample != 0 {
		gap, when := (float64(t.Dump)-float64(t.FirstSample))/1e6, "after"
		if gap < 0 {
			gap, when = -gap, "before"
		}
		fmt.Fprintf(stderr, "synth: inject: the dump began %.1f ms %s perf's first sample (loading %.1f ms, %.1f ms of it after perf's header)\n",
			gap, when, (float64(t.Loaded)-float64(t.LoadStart))/1e6,
			max(0, float64(t.Loaded)-float64(max(t.LoadStart, t.Header)))/1e6)
	}
	printSteps(stderr, st.Dump)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
