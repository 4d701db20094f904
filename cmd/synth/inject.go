package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

func runInject(ctx context.Context, args []string, stdin, stdout *os.File, stderr io.Writer) int {
	cl, ia := injectFlags()
	if code, ok := cl.parse(args, stdout, stderr); !ok {
		return code
	}
	in, out, noBuildID, bidWait, method, threads := &ia.in, &ia.out, &ia.noBuildID, &ia.bidWait, &ia.method, &ia.threads
	if cl.fs.NArg() > 0 {
		return cl.usageError(stderr, "unexpected argument %q", cl.fs.Arg(0))
	}
	var err error
	if *method, err = synth.ParseMethod(string(*method)); err != nil {
		return cl.usageError(stderr, "%v", err)
	}
	if *out == "" {
		if err := checkStdout(stdout); err != nil {
			return cl.usageError(stderr, "%v", err)
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
		KernelCache: ia.kernelCache,
		Fallback: func(method synth.MethodName, err error) {
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
	if ia.verbose > 0 {
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
		removeEmpty(*out)
		return fail(stderr, err)
	}
	if st.BadBuildIDs > 0 {
		fmt.Fprintf(stderr, "synth: inject: warning: %d of perf's MMAP2 records had a build-ID bit perf would misread (the kernel's, or a size over 20): passed on without it\n", st.BadBuildIDs)
	}
	if st.Grown > 0 {
		fmt.Fprintf(stderr, "synth: inject: warning: %d of perf's KSYMBOL, BPF_EVENT or TEXT_POKE records were longer than they are (the kernel grows them for every profiler started after perf): cut to their true size\n", st.Grown)
	}
	fillBuildIDCache(stderr, ia.out, ia.noBuildIDCache, ia.buildIDAll)
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

// injectArgs is synth inject's command line.
type injectArgs struct {
	in, out   string
	noBuildID bool
	bidWait   time.Duration
	method    synth.MethodName
	threads   int
	// kernelCache is the bpf method's kernel cache (Options.KernelCache).
	kernelCache string
	// noBuildIDCache and buildIDAll are perf's -N and --buildid-all,
	// for the build-ID cache written after an injection.
	noBuildIDCache, buildIDAll bool
	verbose                    int
}

// injectFlags defines synth inject's options, which fill ia.
func injectFlags() (*cmdLine, *injectArgs) {
	cl := newCmdLine("inject", "[options]  (perf record -k CLOCK_MONOTONIC --synth=no ... -o - | synth inject ...)")
	ia := &injectArgs{}
	cl.fs.StringVarP(&ia.in, "input", "i", "-", "read perf's pipe from `file` (default: stdin)")
	cl.addOutput(&ia.out, "write perf.data to `file` (default: stdout; pipe mode unless it is a regular file)", "")
	cl.addBuildID(&ia.noBuildID, &ia.bidWait)
	cl.addMethod(&ia.method, &ia.threads)
	cl.addKernelCache(&ia.kernelCache)
	cl.addBuildIDCache(&ia.noBuildIDCache, &ia.buildIDAll)
	cl.addVerbose(&ia.verbose, "print when perf's header came, when the method loaded and the dump began, and where the dump's time went")
	cl.addNegations()
	return cl, ia
}
