package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/synth-dev/synth/cmd/synth/internal/endsig"
	"github.com/synth-dev/synth/cmd/synth/internal/workload"
	"github.com/synth-dev/synth/synth"
)

// workloadGrace is how long an interrupted recording waits for its
// workload to end after SIGTERM before it kills it.
const workloadGrace = 500 * time.Millisecond

// recordArgs is synth record's command line.
type recordArgs struct {
	commonFlags
	freq      string // -F: Hz, max, or "" for the default
	event     string
	cpus      string
	callGraph string
	clockid   string
	quiet     bool
	// noBuildIDCache and buildIDAll are perf record's -N and
	// --buildid-all, for the build-ID cache written after a recording.
	noBuildIDCache, buildIDAll bool
	maxFiles                   int
	switchOut                  switchFlag
	// opts holds the flags' options, with the target's; a workload
	// without a target becomes the target once it is started.
	opts    synth.ProfileOptions
	command []string // the workload, after the options
}

// explicitTarget reports whether the command line names what to
// record (-a, -p, -t, -u, -G): a command then only bounds the time, as
// in perf record -p PID -- sleep 2.
func (r *recordArgs) explicitTarget() bool { return r.all || r.tf.set() }

func runRecord(ctx context.Context, args []string, stdout *os.File, stderr io.Writer) int {
	cl, r := recordFlags()
	if code, ok := cl.parse(args, stdout, stderr); !ok {
		return code
	}
	if err := r.check(cl, stdout); err != nil {
		return cl.usageError(stderr, "%v", err)
	}
	// -q: no summary, no warnings; errors still go to stderr.
	info := stderr
	if r.quiet {
		info = io.Discard
	}
	r.opts.Freq = limitFreq(r.opts.Freq, r.freq == "", info)
	var err error
	var cmd *workload.Cmd
	var ran atomic.Bool // the command was let go
	if len(r.command) > 0 {
		// Stopped before it runs its command: nothing happens if a
		// check below fails.
		if cmd, err = startWorkload(r.command, &r.opts, !r.explicitTarget(), &ran, stderr); err != nil {
			return startFailed(stderr, r.command[0], err)
		}
		defer cmd.Stop(workloadGrace)
	}
	p, err := r.newProfiler(info)
	if err != nil {
		return fail(stderr, err)
	}
	// Only now, with every check passed, is the output replaced.
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(ctx)
	defer cancel()
	endWithTargets(ctx, cancel, cmd, r)
	last := r.out
	// Each file goes into the build-ID cache as it is finished: every
	// --switch-output file as perf record's switch does, else the one.
	cache := func(name string) { fillBuildIDCache(stderr, name, r.noBuildIDCache, r.buildIDAll) }
	st, err := runProfiler(ctx, p, r.out, stdout, info, r.switchOut, r.maxFiles, writeOptions(r.out), &last, cache)
	code, died := workloadStatus(cmd, &ran)
	if err != nil && !errors.Is(err, context.Canceled) {
		removeEmpty(r.out)
		return fail(stderr, err)
	}
	if !r.switchOut.set {
		cache(r.out)
	}
	if r.verbose > 0 {
		printRecordVerbose(info, st)
	}
	code = max(code, recordSummary(info, st, last, stdout))
	if died != 0 {
		return diedOf(died)
	}
	return code
}

// newProfiler opens the profiler of r's options. As perf record
// (evsel__fallback), cycles without a PMU counter is cpu-clock, with
// the same modifiers, said only with -v.
func (r *recordArgs) newProfiler(info io.Writer) (*synth.Profiler, error) {
	p, err := synth.NewProfiler(r.opts)
	name, mods, hasMods := strings.Cut(r.opts.Event, ":")
	if !errors.Is(err, synth.ErrNoEvent) || name != synth.EventCycles {
		return p, err
	}
	if r.verbose > 0 {
		fmt.Fprintln(info, "synth: warning: the cycles event is not supported, falling back to cpu-clock")
	}
	r.opts.Event, r.opts.Fallback = synth.EventCPUClock, true
	if hasMods {
		r.opts.Event += ":" + mods
	}
	return synth.NewProfiler(r.opts)
}

// workloadStatus stops the workload cmd, if any, and returns the exit
// status to pass on, or the signal synth is to die of. A command never
// let go (ran false: interrupted during the dump) has no status of its
// own to pass on.
func workloadStatus(cmd *workload.Cmd, ran *atomic.Bool) (int, syscall.Signal) {
	if cmd == nil {
		return exitOK, 0
	}
	st := cmd.Stop(workloadGrace)
	if !ran.Load() {
		return exitOK, 0
	}
	code, died := workload.Status(st)
	// Killed by synth's own SIGKILL, after a signal to synth that its
	// SIGTERM did not pass on: synth dies of the signal it got, as
	// perf, which sends no SIGKILL, would.
	if cmd.KilledByStop() && endsig.Received() != nil {
		died = 0
	}
	return code, died
}

// printRecordVerbose prints what -v adds to a recording's summary.
func printRecordVerbose(info io.Writer, st synth.ProfileStats) {
	printSummary(info, st.Dump, time.Now().Add(-st.Duration), false)
	if n := st.Session.Grown; n > 0 {
		fmt.Fprintf(info, "synth: %d KSYMBOL or BPF_EVENT %s the kernel had grown (another profiler listening), cut to their true size\n",
			n, plural(n, "record", "records"))
	}
	printThrottled(info, st.Session.Throttled)
}

// endWithTargets cancels the recording when its workload ends, and, with
// -p or -t, when every target has exited, as perf record ends then,
// with or without a command (perf record -p PID -- sleep 3 ends with
// PID, its sleep sent SIGTERM).
func endWithTargets(ctx context.Context, cancel context.CancelFunc, cmd *workload.Cmd, r *recordArgs) {
	if cmd != nil {
		go func() {
			select {
			case <-cmd.Exited():
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	if t := r.opts.Target; r.explicitTarget() && len(t.Pids)+len(t.Tids) > 0 {
		go waitTargets(ctx, cancel, t)
	}
}

// recordFlags defines synth record's options, which fill r.
func recordFlags() (*cmdLine, *recordArgs) {
	cl := newCmdLine("record", "[options] [[--] command [args]]")
	cl.perf = perfRecordOptions
	r := &recordArgs{}
	fs := cl.fs
	fs.StringVarP(&r.event, "event", "e", synth.EventCPUClock,
		"sample `event`: cpu-clock, task-clock, cycles or instructions, with perf's modifiers: :u (user space only), :k (kernel only), :p to :ppp, :P, :S, :G, :H, :D...")
	fs.StringVarP(&r.freq, "freq", "F", "", fmt.Sprintf("sample at `freq` Hz, or max: the kernel's limit (default %d)", synth.DefaultSampleFreq))
	fs.Uint64VarP(&r.opts.Period, "count", "c", 0, "sample once every `n` events (ns for the clocks) instead of at a frequency")
	fs.StringVarP(&r.cpus, "cpu", "C", "", "sample only on these CPUs (`cpu-list`: 0,2-3)")
	fs.BoolVarP(&r.opts.Callchain, "g", "g", false, "record call chains (frame pointers), as --call-graph fp")
	fs.StringVar(&r.callGraph, "call-graph", "", "record call chains by `mode`: fp (dwarf and lbr are not supported)")
	fs.StringVarP(&r.clockid, "clockid", "k", "", "the samples' `clockid`: only CLOCK_MONOTONIC (mono), the clock synth's records are in")
	cl.addCommon(&r.commonFlags, &r.opts.Options, "profile", "write to `file` (a previous one is kept as FILE.old); - for stdout in pipe mode", "perf.data")
	fs.BoolVarP(&r.quiet, "quiet", "q", false, "print no summary and no warnings")
	cl.addBuildIDCache(&r.noBuildIDCache, &r.buildIDAll)
	fs.Var(&r.switchOut, "switch-output", "close the output and start FILE.<timestamp> on SIGUSR2 (`signal`), once it holds SIZE (10M), or every TIME (30s);"+
		" each file starts with a dump of the state")
	fs.Lookup("switch-output").NoOptDefVal = "signal"
	fs.IntVar(&r.maxFiles, "switch-max-files", 0, "with --switch-output, keep only the `n` newest files")
	cl.addNegations()
	return cl, r
}

// check checks the parsed command line as far as it can without
// reading the host; its error is a usage error. It sets the target of
// r.opts, which the profile resolves when it opens, and r.command.
func (r *recordArgs) check(cl *cmdLine, stdout *os.File) error {
	if err := r.opts.Check(); err != nil {
		return err
	}
	var err error
	if r.opts.Target, err = r.target(); err != nil {
		return err
	}
	r.command = cl.fs.Args()
	if err := r.checkSampling(cl); err != nil {
		return err
	}
	if r.opts.CPUs != nil && !r.tf.set() {
		// perf record -C samples every task on those CPUs: a command
		// only bounds the time, as with -a.
		r.all = true
	}
	switch {
	case r.switchOut.set && r.out == "-":
		return errors.New("--switch-output writes files: not with -o -")
	case r.switchOut.set && !regularOrNew(r.out):
		return fmt.Errorf("--switch-output renames -o %s: want a regular file or a new name", r.out)
	case r.maxFiles < 0 || r.maxFiles > 0 && !r.switchOut.set:
		return errors.New("--switch-max-files N: want N >= 0, with --switch-output")
	}
	if r.out == "-" {
		return checkStdout(stdout)
	}
	return nil
}

// checkSampling reads the options of the sampling event.
func (r *recordArgs) checkSampling(cl *cmdLine) error {
	var err error
	if r.opts.Event, err = parseEvent(r.event); err != nil {
		return err
	}
	if r.freq != "" && cl.fs.Changed("count") {
		return errors.New("-F and -c: give a frequency or a period, not both")
	}
	if cl.fs.Changed("count") && r.opts.Period == 0 {
		return errors.New("-c 0: want a period above 0")
	}
	if r.opts.Freq, err = parseFreq(r.freq); err != nil {
		return err
	}
	if r.opts.CPUs, err = parseCPUList(r.cpus); err != nil {
		return fmt.Errorf("-C %s: %w", r.cpus, err)
	}
	switch mode, _, _ := strings.Cut(r.callGraph, ","); mode {
	case "":
	case "fp":
		r.opts.Callchain = true
	case "dwarf", "lbr":
		return fmt.Errorf("--call-graph %s is not supported: only fp (frame pointers, as -g)", mode)
	default:
		return fmt.Errorf("--call-graph %s: want fp", r.callGraph)
	}
	switch strings.ToLower(r.clockid) {
	case "", "clock_monotonic", "monotonic", "mono", "1":
	default:
		return fmt.Errorf("-k %s is not supported: synth's records are timed by CLOCK_MONOTONIC, "+
			"which the dedupe of the dump against the live records relies on", r.clockid)
	}
	return nil
}

// parseEvent reads -e: one event, with perf's modifiers (cycles:pp),
// as perf 6.1 reads them; cpu-cycles is cycles.
func parseEvent(s string) (string, error) {
	name, mods, hasMods := strings.Cut(s, ":")
	switch name {
	case synth.EventCPUClock, synth.EventTaskClock, synth.EventCycles, synth.EventInstructions:
	case "cpu-cycles":
		name = synth.EventCycles
	default:
		if strings.Contains(s, ",") {
			return "", fmt.Errorf("-e %s: synth samples one event", s)
		}
		return "", fmt.Errorf("-e %s is not supported: want cpu-clock, task-clock, cycles or instructions", s)
	}
	if hasMods {
		name += ":" + mods
	}
	if err := synth.CheckEvent(name); err != nil {
		return "", fmt.Errorf("-e %s: %w", s, err)
	}
	return name, nil
}

// parseFreq reads -F: Hz, or max for the kernel's limit.
func parseFreq(s string) (uint64, error) {
	switch s {
	case "":
		return synth.DefaultSampleFreq, nil
	case "max":
		b, err := os.ReadFile(maxSampleRate)
		if err != nil {
			return 0, fmt.Errorf("-F max: %w", err)
		}
		return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	f, err := strconv.ParseUint(s, 10, 64)
	if err != nil || f == 0 {
		return 0, fmt.Errorf("-F %s: want a frequency above 0 in Hz, or max", s)
	}
	return f, nil
}

// parseCPUList reads a CPU list: 0,2-3.
func parseCPUList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("bad CPU %q: want a list such as 0,2-3", f)
		}
		for c := a; c <= b; c++ {
			if !slices.Contains(cpus, c) {
				cpus = append(cpus, c)
			}
		}
	}
	return cpus, nil
}

// waitTargets cancels once every process (-p) or thread (-t) of t has
// exited, as perf record ends then; it polls /proc, where an exited
// process its parent has not reaped yet shows as a zombie.
func waitTargets(ctx context.Context, cancel context.CancelFunc, t synth.Target) {
	ids := t.Tids
	if len(t.Pids) > 0 {
		for _, id := range t.Pids {
			ids = append(ids, tgidOf(id)) // a thread's id means its process
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !slices.ContainsFunc(ids, alive) {
			cancel()
			return
		}
	}
}

// tgidOf returns the process of task id, or id if it cannot tell.
func tgidOf(id int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", id))
	if err != nil {
		return id
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return id
}

// alive reports whether task id still runs: it exists and is no zombie.
func alive(id int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", id))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// startWorkload starts the command to record, stopped before it runs
// it. As the target (no -a, -p, -t, -u or -G), opts is pointed at it:
// its events open on its exec, and it goes once the rings are open. As
// a timer, it goes once the sampling has started.
// ran is set when the command is let go.
func startWorkload(command []string, opts *synth.ProfileOptions, target bool, ran *atomic.Bool, stderr io.Writer) (*workload.Cmd, error) {
	cmd, err := workload.Start(command)
	if err != nil {
		return nil, err
	}
	if target {
		opts.Target = synth.Target{Pids: []int{cmd.Process.Pid}}
		opts.OnExec = true
	}
	let := func() {
		ran.Store(true)
		if err := cmd.Go(); err != nil {
			fmt.Fprintf(stderr, "synth: %v\n", err)
		}
	}
	if target {
		opts.Started = let // its events open on its exec
	} else {
		// Only a timer: it runs once the samples are taken, as perf
		// record starts its workload after the synthesis.
		opts.Sampling = let
	}
	return cmd, nil
}

// runProfiler runs p into the -o file (or stdout), or into the files of
// --switch-output, reporting each as perf record does and handing it to
// cache once it is complete.
// last is set to the name of the last file written.
func runProfiler(ctx context.Context, p *synth.Profiler, out string, stdout *os.File, stderr io.Writer,
	sw switchFlag, maxFiles int, wopts synth.WriteOptions, last *string, cache func(name string)) (synth.ProfileStats, error) {
	if !sw.set {
		w, closeOut, err := openOutput(out, stdout, true)
		if err != nil {
			p.Close()
			return synth.ProfileStats{}, err
		}
		st, err := p.Run(ctx, w, wopts)
		if cerr := closeOut(); err == nil && cerr != nil {
			err = cerr
		}
		return st, err
	}
	if err := keepOld(out); err != nil {
		p.Close()
		return synth.ProfileStats{}, err
	}
	// SIGUSR2 switches in signal mode, and is ignored in the others,
	// as perf ignores it: it must not kill a recording.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	defer signal.Stop(sig)
	files := synth.TimestampedFiles(out, maxFiles, func(name string) {
		fmt.Fprintf(stderr, "synth: wrote %s\n", name)
		*last = name
		cache(name)
	})
	return p.RunSwitching(ctx, files, sw.options(sig), wopts)
}

// maxSampleRate is the kernel's limit on sampling frequencies.
const maxSampleRate = "/proc/sys/kernel/perf_event_max_sample_rate"

// limitFreq lowers a frequency above the kernel's limit to the limit,
// with a warning, as perf record does (the kernel would refuse it); the
// default's warning, as perf's, names no -F the user did not give.
func limitFreq(freq uint64, isDefault bool, stderr io.Writer) uint64 {
	b, err := os.ReadFile(maxSampleRate)
	if err != nil {
		return freq
	}
	limit, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || limit == 0 || freq <= limit {
		return freq
	}
	if isDefault {
		fmt.Fprintf(stderr, "synth: warning: lowering the default frequency from %d Hz to the kernel's limit, %d Hz (%s)\n",
			freq, limit, maxSampleRate)
		return limit
	}
	fmt.Fprintf(stderr, "synth: warning: -F %d is above the kernel's limit (%s: %d); sampling at %d Hz\n",
		freq, maxSampleRate, limit, limit)
	return limit
}

// recordSummary prints what a recording holds and returns its status.
// Records the kernel dropped (full rings) are a warning, as perf record
// warns of them and exits 0; records the dump lost leave the file
// without some of the state it describes, which synth never does
// silently: status 1. Both are marked in the file (PERF_RECORD_LOST).
// The first line is perf record's, naming the last file written (out;
// - for stdout) and its size.
func recordSummary(stderr io.Writer, st synth.ProfileStats, out string, stdout *os.File) int {
	s := st.Session
	fmt.Fprintf(stderr, "[ perf record: Captured and wrote %s (%d %s) ]\n",
		wroteWhat(out, stdout), s.Samples, plural(s.Samples, "sample", "samples"))
	fmt.Fprintf(stderr, "synth: recorded %d %s, %d mappings synthesized, %d live records; lost: %d by the kernel, %d of the dump; %v\n",
		s.Samples, plural(s.Samples, "sample", "samples"), st.Dump.Mappings, s.Live, s.LiveLost, s.Lost, st.Duration.Round(time.Millisecond))
	if n := len(st.SwitchStalls); n > 0 {
		fmt.Fprintf(stderr, "synth: %d files, %d switches; each switch's dump took at most %v (mean %v)\n",
			st.Files, n, slices.Max(st.SwitchStalls).Round(time.Microsecond), mean(st.SwitchStalls).Round(time.Microsecond))
	}
	if s.LiveLost > 0 {
		fmt.Fprintf(stderr, "synth: warning: the kernel dropped %d records (samples or side-band): the rings filled faster than synth read them;"+
			" the output marks them with PERF_RECORD_LOST; lower -F or raise -m\n", s.LiveLost)
	}
	if s.Lost > 0 {
		fmt.Fprintf(stderr, "synth: the dump lost %d records: the profile is incomplete (try a larger -m)\n", s.Lost)
		return exitError
	}
	return exitOK
}

// printThrottled says, with -v, how often the kernel throttled the
// sampling. perf record 6.1 says nothing of it, at any -F: the
// THROTTLE and UNTHROTTLE records are in the file (perf report --stats
// counts them), and the kernel throttles a busy host at the default
// rate, where a warning would only tell the user to lower a rate they
// never chose.
func printThrottled(stderr io.Writer, n uint64) {
	if n > 0 {
		fmt.Fprintf(stderr, "synth: the kernel throttled sampling %d times (its interrupts took more than kernel.perf_cpu_time_max_percent);"+
			" the output has the THROTTLE records\n", n)
	}
}

// wroteWhat is the size and name of a written output, as perf record
// prints them: 0.262 MB perf.data; without the size when it is not a
// file.
func wroteWhat(out string, stdout *os.File) string {
	name, f := out, stdout
	if out == "-" {
		name = "-"
	} else if of, err := os.Open(out); err == nil {
		defer of.Close()
		f = of
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		return fmt.Sprintf("%.3f MB %s", float64(st.Size())/(1<<20), name)
	}
	return name
}

// plural returns one for n == 1, else many.
func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// regularOrNew reports whether path names a regular file or nothing.
func regularOrNew(path string) bool {
	st, err := os.Lstat(path)
	return errors.Is(err, fs.ErrNotExist) || err == nil && st.Mode().IsRegular()
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// startFailed reports a workload that could not be started, and returns
// the status env(1), nice(1) and timeout(1) give then: 127 when the
// command is not found, 126 when it is found but cannot be run.
func startFailed(stderr io.Writer, name string, err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(stderr, "synth: record: %s: command not found\n", name)
		return exitNotFound
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		fmt.Fprintf(stderr, "synth: record: %s: cannot run it: %v\n", name, err)
		return exitCannotRun
	}
	return fail(stderr, fmt.Errorf("start %s: %w", name, err))
}

// Exit statuses of a workload that could not run (see startFailed).
const (
	exitCannotRun = 126
	exitNotFound  = 127
)
