package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/synth-dev/synth/internal/bench"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

func runDump(ctx context.Context, args []string, stdout *os.File, stderr io.Writer) int {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	var (
		out       = fs.String("o", "", "write perf.data to `FILE` (default: stdout; pipe mode unless it is a regular file)")
		data      = fs.Bool("data", false, "include non-executable mappings, as perf record -d")
		noKernel  = fs.Bool("no-kernel", false, "leave out the kernel and module maps and the BPF programs' symbols")
		noBPF     = fs.Bool("no-bpf-event", false, "leave out the BPF_EVENT record of each loaded BPF program (its KSYMBOLs stay), as perf record --no-bpf-event")
		noBuildID = fs.Bool("no-buildid", false, "identify files by maj/min/ino instead of build ID")
		bidWait   = fs.Duration("buildid-timeout", synth.DefaultBuildIDTimeout, "wait at most `DURATION` for the build IDs of files new to the cache; a file whose reads block past it (FUSE, NFS) gets none")
		mapWait   = fs.Duration("proc-map-timeout", synth.DefaultProcMapTimeout, "wait at most `DURATION` for a process's mmap lock; a process whose lock is held longer is left out and named, as perf record --proc-map-timeout")
		method    = fs.String("method", "auto", "`METHOD`: auto, bpf, procmaps or procquery")
		threads   = fs.Int("threads", 0, "worker threads of the /proc methods (default: one per CPU)")
		walk      = fs.String("walk", synth.WalkAuto, "bpf method: how to read each process's VMAs: `WALK` auto (maple where the kernel can prove it), maple (lockless, validated) or iter (the task_vma iterator)")
		noLive    = fs.Bool("no-live", false, "bpf method: dump without the live side-band (a mapping made meanwhile may be missed)")
		warmup    = fs.Int("warmup", 0, "dump `N` times first and write nothing of it: a benchmark's warm build-ID cache")
		nsFlag    = fs.Bool("namespaces", false, "add a NAMESPACES record for every task, as perf record --namespaces")
		cgroups   = fs.Bool("all-cgroups", false, "add a CGROUP record for every cgroup, as perf record --all-cgroups")
		verbose   = fs.Bool("v", false, "print where the time went (loading, then the dump's phases) and the maple walk's counts")
		ringPages = fs.Int("ring-pages", 0, fmt.Sprintf("per-CPU ring size in `pages`: a power of two >= %d (default %d)", synth.MinRingPages, synth.DefaultRingPages))
	)
	tf := addTargetFlags(fs, "dump")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: synth dump [-o FILE] [-p PID,... | -t TID,... | -u USER | -G CGROUP] [--data] [--namespaces] [--all-cgroups]\n                  [--no-bpf-event] [--no-kernel] [--no-buildid] [--buildid-timeout D] [--proc-map-timeout D]\n                  [--method auto|bpf|procmaps|procquery] [--walk maple|iter] [--threads N] [--ring-pages N] [--no-live] [--warmup N] [-v]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "dump: unexpected argument %q", fs.Arg(0))
	}
	opts := synth.Options{Data: *data, NoKernel: *noKernel, NoBuildID: *noBuildID, RingPages: *ringPages, NoLive: *noLive, Walk: *walk,
		BuildIDTimeout: *bidWait, ProcMapTimeout: *mapWait, Namespaces: *nsFlag, Cgroups: *cgroups, NoBPFEvent: *noBPF}
	if err := opts.Check(); err != nil {
		return usageError(stderr, "dump: %v", err)
	}
	if !knownMethod(*method, bench.MethodFloor) {
		return usageError(stderr, "dump: unknown method %q (want auto, bpf, procmaps or procquery)", *method)
	}
	target, err := tf.target()
	if err != nil {
		return usageError(stderr, "dump: %v", err)
	}
	if *out == "" {
		if err := checkStdout(stdout); err != nil {
			return usageError(stderr, "dump: %v", err)
		}
	}
	if opts.Pids, err = target.Processes(); err != nil {
		return fail(stderr, err)
	}
	opts.Tids = target.Tids
	var wopts synth.WriteOptions
	if *out == "-" {
		wopts.Mode = perfdata.ModePipe // as perf record -o -
	}

	// A dump is one short burst of allocation, much of it cilium/ebpf's
	// parse of the kernel's BTF: collecting at 5x the live heap, not 2x,
	// spares most collections (15% of a one-shot dump's CPU), and the
	// limit keeps a dump of a host with a million mappings in bounds.
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(48 << 20)
	start := time.Now()
	if *method == bench.MethodFloor {
		st, err := bench.Floor(ctx, opts.Walk, *warmup)
		if err != nil {
			return fail(stderr, err)
		}
		printSummary(stderr, st, start, *verbose)
		return exitOK
	}
	var why []error
	m, err := synth.OpenMethod(*method, synth.MethodOptions{Options: opts, Threads: *threads,
		Fallback: func(method string, err error) { why = append(why, fmt.Errorf("%s: %w", method, err)) }})
	if err != nil {
		code := fail(stderr, err)
		if *verbose {
			printVerifierLog(stderr, append(why, err)...)
		}
		return code
	}
	defer m.Close()
	if len(why) > 0 {
		fmt.Fprintf(stderr, "synth: using a fallback method because %v\n", joinErrs(why))
		if *verbose {
			printVerifierLog(stderr, why...)
		}
	}
	for range *warmup {
		if _, err := m.Dump(ctx, func([]byte) error { return nil }); err != nil {
			return fail(stderr, fmt.Errorf("warm-up dump: %w", err))
		}
	}
	w, closeOut, err := openOutput(*out, stdout, false)
	if err != nil {
		return fail(stderr, err)
	}
	st, err := synth.WritePerfData(ctx, m, w, wopts)
	if cerr := closeOut(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fail(stderr, err)
	}
	printSummary(stderr, st, start, *verbose)
	if !*noBuildID {
		fmt.Fprintf(stderr, "synth: build IDs: %d of %d file-backed mappings; %d files in the cache; read now: %d files, %d with a build ID\n",
			st.BuildIDMappings, st.FileMappings, st.Cached, st.FilesRead, st.BuildIDsRead)
	}
	if st.Unreadable > 0 {
		fmt.Fprintf(stderr, "synth: warning: %d of %d processes' mappings could not be read (permission denied); run as root for all of them\n",
			st.Unreadable, st.Processes)
	}
	if len(st.LockedOut) > 0 {
		fmt.Fprintf(stderr, "synth: warning: %d processes left out: their mmap lock was not taken within %v (a writer holds it): %s\n",
			len(st.LockedOut), *mapWait, namePids(st.LockedOut))
	}
	if st.BuildIDTimeouts > 0 {
		fmt.Fprintf(stderr, "synth: warning: %d files not read within %v (their reads block): their mappings are identified by inode, without a build ID\n",
			st.BuildIDTimeouts, *bidWait)
	}
	if st.Method == synth.MethodBPF && !*noLive {
		fmt.Fprintf(stderr, "synth: live side-band: %d records while dumping, %d synthesized records dropped as reported live first\n",
			st.Live, st.Duplicates)
	}
	if st.LiveLost > 0 {
		fmt.Fprintf(stderr, "synth: warning: the kernel dropped %d live records while dumping; the output marks them with PERF_RECORD_LOST\n", st.LiveLost)
	}
	if st.Lost > 0 {
		fmt.Fprintf(stderr, "synth: %d records lost: the dump is incomplete (try a larger --ring-pages)\n", st.Lost)
		return exitError
	}
	return exitOK
}

// joinErrs renders errors on one line.
func joinErrs(errs []error) string {
	s := make([]string, len(errs))
	for i, e := range errs {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

// printVerifierLog prints the end of the verifier's log of each program
// the kernel refused in errs, once: the one line that named the refusal
// has the verdict, this the lines that led to it.
func printVerifierLog(stderr io.Writer, errs ...error) {
	done := map[string]bool{}
	for _, err := range errs {
		var pe *synth.ProgramError
		if !errors.As(err, &pe) || len(pe.Log) == 0 || done[pe.Program] {
			continue
		}
		done[pe.Program] = true
		fmt.Fprintf(stderr, "synth: the verifier refused %s; the end of its log:\n", pe.Program)
		for _, l := range pe.Log {
			fmt.Fprintf(stderr, "synth:   %s\n", l)
		}
	}
}

// namePids renders processes as "PID (COMM)", as far as they still run.
func namePids(pids []int) string {
	s := make([]string, len(pids))
	for i, pid := range pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		s[i] = fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(string(comm)))
		if err != nil {
			s[i] = fmt.Sprintf("%d (gone)", pid)
		}
	}
	return strings.Join(s, ", ")
}

// printSummary prints the dump's line (the bench parses it), and with
// verbose where its time went; then why the walk is not maple, and how
// long the BPF programs ran.
func printSummary(stderr io.Writer, st synth.Stats, start time.Time, verbose bool) {
	name := st.Method
	if st.Walk != "" {
		name += " (walk " + st.Walk + ")"
	}
	fmt.Fprintf(stderr, "synth: method %s: %d processes, %d mappings, %d records, %d lost, %v (%v with loading)\n",
		name, st.Processes, st.Mappings, st.Records, st.Lost,
		st.Elapsed.Round(10*time.Microsecond), time.Since(start).Round(100*time.Microsecond))
	if verbose {
		printSteps(stderr, st)
	}
	if st.WalkFallback != nil {
		fmt.Fprintf(stderr, "synth: walk %s, not maple: %v\n", st.Walk, st.WalkFallback)
		if verbose {
			printVerifierLog(stderr, st.WalkFallback)
		}
	}
	if st.ProgramTime > 0 {
		fmt.Fprintf(stderr, "synth: BPF programs ran %v of it (kernel.bpf_stats_enabled)\n", st.ProgramTime.Round(10*time.Microsecond))
	}
}

// printSteps prints where the time of a dump went, and its walk's counts.
func printSteps(stderr io.Writer, st synth.Stats) {
	parts := make([]string, len(st.Steps))
	for i, s := range st.Steps {
		parts[i] = fmt.Sprintf("%s %.2f ms", s.Name, float64(s.Took)/1e6)
	}
	if len(parts) > 0 {
		fmt.Fprintf(stderr, "synth: time: %s\n", strings.Join(parts, ", "))
	}
	if st.Walk == synth.WalkMaple {
		fmt.Fprintf(stderr, "synth: maple walk: %d chunks resumed, %d processes read again with the iterator (changed while walked)\n",
			st.Resumed, st.WalksInvalid)
	}
}
