package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/synth-dev/synth/internal/workload"
	"github.com/synth-dev/synth/synth"
)

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("synth record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		freq      = fs.Uint64("F", 4000, "sample at `HZ`")
		all       = fs.Bool("a", false, "profile every CPU and process (the default without -p or a command)")
		pids      = fs.String("p", "", "profile only these processes (`PID[,PID...]`) and their new children")
		callchain = fs.Bool("g", false, "record call chains")
		out       = fs.String("o", "perf.data", "write to `FILE`; - for stdout in pipe mode")
		noBuildID = fs.Bool("no-buildid", false, "identify files by maj/min/ino instead of build ID")
		ringPages = fs.Int("ring-pages", 0, "per-CPU ring size in `pages` (default 256)")
	)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: synth record [-F HZ] [-a | -p PID[,PID...]] [-g] [-o FILE] [--no-buildid] [-- CMD ARGS]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	opts := synth.ProfileOptions{Freq: *freq, Callchain: *callchain, NoBuildID: *noBuildID, RingPages: *ringPages}
	var err error
	if opts.Pids, err = parsePids(*pids); err != nil {
		fmt.Fprintf(stderr, "synth record: -p: %v\n", err)
		return exitUsage
	}
	command := fs.Args()
	if *all && (len(opts.Pids) > 0 || len(command) > 0) {
		fmt.Fprintln(stderr, "synth record: -a takes neither -p nor a command")
		return exitUsage
	}
	if len(opts.Pids) > 0 && len(command) > 0 {
		fmt.Fprintln(stderr, "synth record: -p takes no command")
		return exitUsage
	}
	var wopts synth.WriteOptions
	if *out == "-" {
		pipe := true
		wopts.Pipe = &pipe
	}
	var cmd *workload.Cmd
	if len(command) > 0 {
		if cmd, err = workload.Start(command); err != nil {
			return fail(stderr, fmt.Errorf("start %s: %w", command[0], err))
		}
		defer cmd.Abort()
		opts.Pids = []int{cmd.Process.Pid}
		done := make(chan struct{})
		opts.Done = done
		opts.Started = func() {
			if err := cmd.Go(); err != nil {
				fmt.Fprintf(stderr, "synth record: %v\n", err)
			}
			go func() { cmd.Wait(); close(done) }()
		}
	}
	w, closeOut, err := openOutput(*out, stdout)
	if err != nil {
		return fail(stderr, err)
	}
	st, err := synth.Profile(ctx, opts, w, wopts)
	if cerr := closeOut(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, err)
	}
	s := st.Session
	fmt.Fprintf(stderr, "synth record: %d samples, %d mappings synthesized, %d live records, %d lost, %v\n",
		s.Samples, st.Dump.Mappings, s.Live, s.Lost, st.Duration.Round(time.Millisecond))
	if s.LiveLost > 0 {
		fmt.Fprintf(stderr, "synth record: warning: the kernel dropped %d records (samples or side-band); the output marks them with PERF_RECORD_LOST\n", s.LiveLost)
	}
	if s.Lost > 0 {
		fmt.Fprintf(stderr, "synth record: %d records lost: the profile is incomplete (try a larger --ring-pages or a lower -F)\n", s.Lost)
		return exitError
	}
	return exitOK
}
