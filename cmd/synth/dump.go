package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/synth-dev/synth/synth"
)

// dumpArgs is synth dump's command line.
type dumpArgs struct {
	commonFlags
	method  synth.MethodName
	threads int
	warmup  int
	opts    synth.Options // the flags' options, with the target's
}

func runDump(ctx context.Context, args []string, stdout *os.File, stderr io.Writer) int {
	cl, d := dumpFlags()
	if code, ok := cl.parse(args, stdout, stderr); !ok {
		return code
	}
	if err := d.check(cl, stdout); err != nil {
		return cl.usageError(stderr, "%v", err)
	}
	// A dump is one short burst of allocation, much of it cilium/ebpf's
	// parse of the kernel's BTF: collecting at 5x the live heap, not 2x,
	// spares most collections (15% of a one-shot dump's CPU), and the
	// limit keeps a dump of a host with a million mappings in bounds.
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(48 << 20)
	start := time.Now()
	m, code, ok := openDumpMethod(d, stderr)
	if !ok {
		return code
	}
	defer m.Close()
	st, err := writeDump(ctx, m, d, stdout)
	if err != nil {
		removeEmpty(d.out)
		return fail(stderr, err)
	}
	return reportDump(stderr, d, st, start)
}

// dumpFlags defines synth dump's options, which fill d.
func dumpFlags() (*cmdLine, *dumpArgs) {
	cl := newCmdLine("dump", "[options]")
	d := &dumpArgs{}
	cl.addCommon(&d.commonFlags, &d.opts, "dump", "write perf.data to `file` (default: stdout; pipe mode unless it is a regular file)", "")
	fs := cl.fs
	fs.BoolVar(&d.opts.NoKernel, "no-kernel", false, "leave out the kernel and module maps and the BPF programs' symbols")
	cl.addMethod(&d.method, &d.threads)
	fs.StringVar((*string)(&d.opts.Walk), "walk", "auto", "bpf method: how to read each process's VMAs: `walk` auto (maple where the kernel can prove it), maple (lockless, validated) or iter (the task_vma iterator)")
	fs.BoolVar(&d.opts.NoLive, "no-live", false, "bpf method: dump without the live side-band (a mapping made meanwhile may be missed)")
	fs.IntVar(&d.warmup, "warmup", 0, "dump `n` times first and write nothing of it: a benchmark's warm build-ID cache")
	cl.addNegations()
	return cl, d
}

// check checks the parsed command line as far as it can without
// reading the host; its error is a usage error. It sets the target of
// d.opts, which the method resolves when it opens.
func (d *dumpArgs) check(cl *cmdLine, stdout *os.File) error {
	if cl.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", cl.fs.Arg(0))
	}
	if err := d.opts.Check(); err != nil {
		return err
	}
	var err error
	if d.method, err = synth.ParseMethod(string(d.method)); err != nil {
		return err
	}
	if d.opts.Target, err = d.target(); err != nil {
		return err
	}
	if d.out == "" {
		return checkStdout(stdout)
	}
	return nil
}

// openDumpMethod opens d's method, saying why if it fell back to
// another. On failure it prints why and returns the status to exit with.
func openDumpMethod(d *dumpArgs, stderr io.Writer) (*synth.Method, int, bool) {
	var why []error
	m, err := synth.OpenMethod(d.method, synth.MethodOptions{Options: d.opts, Threads: d.threads,
		Fallback: func(method synth.MethodName, err error) { why = append(why, fmt.Errorf("%s: %w", method, err)) }})
	if err != nil {
		code := fail(stderr, err)
		if d.verbose > 0 {
			printVerifierLog(stderr, append(why, err)...)
		}
		return nil, code, false
	}
	if len(why) > 0 {
		fmt.Fprintf(stderr, "synth: using a fallback method because %v\n", joinErrs(why))
		if d.verbose > 0 {
			printVerifierLog(stderr, why...)
		}
	}
	return m, exitOK, true
}

// writeDump dumps with m, after the warm-up dumps, into the -o file or
// stdout. The output is opened only now, as it replaces the file.
func writeDump(ctx context.Context, m *synth.Method, d *dumpArgs, stdout *os.File) (synth.Stats, error) {
	for range d.warmup {
		if _, err := m.Dump(ctx, func([]byte) error { return nil }); err != nil {
			return synth.Stats{}, fmt.Errorf("warm-up dump: %w", err)
		}
	}
	w, closeOut, err := openOutput(d.out, stdout, false)
	if err != nil {
		return synth.Stats{}, err
	}
	st, err := synth.WritePerfData(ctx, m, w, writeOptions(d.out))
	if cerr := closeOut(); err == nil && cerr != nil {
		err = cerr
	}
	return st, err
}

// reportDump prints the summary of a written dump and its warnings, and
// returns its status: an error if records were lost.
func reportDump(stderr io.Writer, d *dumpArgs, st synth.Stats, start time.Time) int {
	printSummary(stderr, st, start, d.verbose > 0)
	if !d.opts.NoBuildID {
		fmt.Fprintf(stderr, "synth: build IDs: %d of %d file-backed mappings; %d files in the cache; read now: %d files, %d with a build ID\n",
			st.BuildIDMappings, st.FileMappings, st.Cached, st.FilesRead, st.BuildIDsRead)
	}
	if st.Unreadable > 0 {
		fmt.Fprintf(stderr, "synth: warning: %d of %d processes' mappings could not be read (permission denied)%s\n",
			st.Unreadable, st.Processes, rootAdvice())
	}
	if len(st.LockedOut) > 0 {
		fmt.Fprintf(stderr, "synth: warning: %d processes left out: their mmap lock was not taken within %v (a writer holds it): %s\n",
			len(st.LockedOut), d.opts.ProcMapTimeout, namePids(st.LockedOut))
	}
	if st.BuildIDTimeouts > 0 {
		fmt.Fprintf(stderr, "synth: warning: %d files not read within %v (their reads block): their mappings are identified by inode, without a build ID\n",
			st.BuildIDTimeouts, d.opts.BuildIDTimeout)
	}
	if st.Method == synth.MethodBPF && !d.opts.NoLive {
		fmt.Fprintf(stderr, "synth: live side-band: %d records while dumping, %d synthesized records dropped as reported live first\n",
			st.Live, st.Duplicates)
	}
	if st.LiveLost > 0 {
		fmt.Fprintf(stderr, "synth: warning: the kernel dropped %d live records while dumping; the output marks them with PERF_RECORD_LOST\n", st.LiveLost)
	}
	if st.Lost > 0 {
		fmt.Fprintf(stderr, "synth: %d records lost: the dump is incomplete (try a larger -m/--mmap-pages)\n", st.Lost)
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
		if !errors.As(err, &pe) || done[pe.Program] {
			continue
		}
		log := pe.VerifierLog()
		if len(log) == 0 {
			continue
		}
		done[pe.Program] = true
		fmt.Fprintf(stderr, "synth: the verifier refused %s; the end of its log:\n", pe.Program)
		for _, l := range log {
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
	name := st.Method.String()
	if st.Walk != "" {
		name += " (walk " + st.Walk.String() + ")"
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
	if st.KernelCacheMiss != nil {
		fmt.Fprintf(stderr, "synth: kernel cache: %v (linked against the kernel's BTF)\n", st.KernelCacheMiss)
	}
	if st.Walk == synth.WalkMaple {
		fmt.Fprintf(stderr, "synth: maple walk: %d chunks resumed, %d processes read again with the iterator (changed while walked)\n",
			st.Resumed, st.WalksInvalid)
	}
}

// rootAdvice is the advice a warning of unreadable processes ends with:
// none for root, whose reads failed for another reason (a process's
// own hardening, a mount's) that running as root again cannot mend.
func rootAdvice() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return "; run as root for all of them"
}
