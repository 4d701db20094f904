package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synth-dev/synth/cmd/synth/internal/workload"
	"github.com/synth-dev/synth/synth"
)

// workloadGrace is how long an interrupted recording waits for its
// workload to end after SIGTERM before it kills it.
const workloadGrace = 500 * time.Millisecond

// recordArgs is synth record's command line.
type recordArgs struct {
	out       string
	all       bool
	maxFiles  int
	switchOut switchFlag
	// opts holds the flags' options, with the target's; a workload
	// becomes the target once it is started.
	opts    synth.ProfileOptions
	tf      *targetFlags
	command []string // the workload, after the flags

	// The build-ID cache: -N skips it, --buildid-all takes every file.
	noBuildIDCache, buildIDAll bool
}

func runRecord(ctx context.Context, args []string, stdout *os.File, stderr io.Writer) int {
	fs, r := recordFlags(stderr)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := r.check(fs, stdout); err != nil {
		return usageError(stderr, "record: %v", err)
	}
	r.opts.Freq = limitFreq(r.opts.Freq, stderr)
	var err error
	var cmd *workload.Cmd
	if len(r.command) > 0 {
		// Stopped before it runs its command: nothing happens if a
		// check below fails.
		if cmd, err = startWorkload(r.command, &r.opts, stderr); err != nil {
			return startFailed(stderr, r.command[0], err)
		}
		defer cmd.Stop(workloadGrace)
	}
	p, err := synth.NewProfiler(r.opts)
	if err != nil {
		return fail(stderr, err)
	}
	// Only now, with every check passed, is the output replaced.
	if cmd != nil {
		// The recording ends when the workload does.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-cmd.Exited():
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	st, err := runProfiler(ctx, p, r.out, stdout, stderr, r.switchOut, r.maxFiles, writeOptions(r.out))
	code := exitOK
	if cmd != nil {
		code = workload.ExitCode(cmd.Stop(workloadGrace))
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, err)
	}
	if !r.switchOut.set {
		fillBuildIDCache(stderr, r.out, r.noBuildIDCache, r.buildIDAll)
	}
	return max(code, recordSummary(stderr, st))
}

// recordFlags defines synth record's flags, which fill r.
func recordFlags(stderr io.Writer) (*flag.FlagSet, *recordArgs) {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	r := &recordArgs{}
	fs.Uint64Var(&r.opts.Freq, "F", synth.DefaultSampleFreq, "sample at `HZ`")
	fs.BoolVar(&r.all, "a", false, "profile every CPU and process (the default without -p or a command)")
	fs.BoolVar(&r.opts.Callchain, "g", false, "record call chains")
	fs.StringVar(&r.out, "o", "perf.data", "write to `FILE` (a previous one is kept as FILE.old); - for stdout in pipe mode")
	fs.BoolVar(&r.opts.NoBuildID, "no-buildid", false, "identify files by maj/min/ino instead of build ID")
	fs.BoolVar(&r.noBuildIDCache, "N", false, "do not put the files with samples in the build-ID cache (~/.debug)")
	fs.BoolVar(&r.noBuildIDCache, "no-buildid-cache", false, "same as -N")
	fs.BoolVar(&r.buildIDAll, "buildid-all", false, "put every file of the build-ID table in the build-ID cache, not only those with samples")
	fs.BoolVar(&r.opts.Namespaces, "namespaces", false, "record NAMESPACES for every task, as perf record --namespaces")
	fs.BoolVar(&r.opts.Cgroups, "all-cgroups", false, "record CGROUP for every cgroup, as perf record --all-cgroups")
	fs.BoolVar(&r.opts.NoBPFEvent, "no-bpf-event", false, "record no BPF_EVENT records (KSYMBOLs stay), as perf record --no-bpf-event")
	fs.IntVar(&r.opts.RingPages, "ring-pages", 0, fmt.Sprintf("per-CPU ring size in `pages`: a power of two >= %d (default %d)", synth.MinRingPages, synth.DefaultRingPages))
	fs.IntVar(&r.maxFiles, "switch-max-files", 0, "with --switch-output, keep only the `N` newest files")
	fs.Var(&r.switchOut, "switch-output", "close the output and start FILE.<timestamp> on SIGUSR2 (`signal`), once it holds SIZE (10M), or every TIME (30s);"+
		" each file starts with a dump of the state")
	r.tf = addTargetFlags(fs, "profile")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: synth record [-F HZ] [-a | -p PID,... | -t TID,... | -u USER | -G CGROUP] [-g] [-o FILE]\n                    [--namespaces] [--all-cgroups] [--no-bpf-event] [--no-buildid] [--ring-pages N]\n                    [--switch-output[=signal|SIZE|TIME] [--switch-max-files N]] [-- CMD ARGS]")
		fs.PrintDefaults()
	}
	return fs, r
}

// check checks the parsed command line as far as it can without
// reading the host; its error is a usage error. It sets the target of
// r.opts, which the profile resolves when it opens, and r.command.
func (r *recordArgs) check(fs *flag.FlagSet, stdout *os.File) error {
	if err := r.opts.Check(); err != nil {
		return err
	}
	var err error
	if r.opts.Target, err = r.tf.target(); err != nil {
		return err
	}
	r.command = fs.Args()
	switch {
	case r.all && (r.tf.set() || len(r.command) > 0):
		return errors.New("-a takes neither a target (-p, -t, -u, -G) nor a command")
	case r.tf.set() && len(r.command) > 0:
		return errors.New("a target (-p, -t, -u, -G) takes no command")
	case r.opts.Freq == 0:
		return errors.New("-F 0: want a frequency above 0")
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

// startWorkload starts the command to record, stopped before it runs
// it, and points opts at it: its events open on its exec, and go when
// the recording has started.
func startWorkload(command []string, opts *synth.ProfileOptions, stderr io.Writer) (*workload.Cmd, error) {
	cmd, err := workload.Start(command)
	if err != nil {
		return nil, err
	}
	opts.Target = synth.Target{Pids: []int{cmd.Process.Pid}}
	opts.OnExec = true
	opts.Started = func() {
		if err := cmd.Go(); err != nil {
			fmt.Fprintf(stderr, "synth: %v\n", err)
		}
	}
	return cmd, nil
}

// runProfiler runs p into the -o file (or stdout), or into the files of
// --switch-output, reporting each as perf record does.
func runProfiler(ctx context.Context, p *synth.Profiler, out string, stdout *os.File, stderr io.Writer,
	sw switchFlag, maxFiles int, wopts synth.WriteOptions) (synth.ProfileStats, error) {
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
	})
	return p.RunSwitching(ctx, files, sw.options(sig), wopts)
}

// maxSampleRate is the kernel's limit on sampling frequencies.
const maxSampleRate = "/proc/sys/kernel/perf_event_max_sample_rate"

// limitFreq lowers a frequency above the kernel's limit to the limit,
// with a warning, as perf record does (the kernel would refuse it).
func limitFreq(freq uint64, stderr io.Writer) uint64 {
	b, err := os.ReadFile(maxSampleRate)
	if err != nil {
		return freq
	}
	limit, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || limit == 0 || freq <= limit {
		return freq
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
func recordSummary(stderr io.Writer, st synth.ProfileStats) int {
	s := st.Session
	fmt.Fprintf(stderr, "synth: recorded %d %s, %d mappings synthesized, %d live records; lost: %d by the kernel, %d of the dump; %v\n",
		s.Samples, plural(s.Samples, "sample", "samples"), st.Dump.Mappings, s.Live, s.LiveLost, s.Lost, st.Duration.Round(time.Millisecond))
	if n := len(st.SwitchStalls); n > 0 {
		fmt.Fprintf(stderr, "synth: %d files, %d switches; each switch's dump took at most %v (mean %v)\n",
			st.Files, n, slices.Max(st.SwitchStalls).Round(time.Microsecond), mean(st.SwitchStalls).Round(time.Microsecond))
	}
	if s.LiveLost > 0 {
		fmt.Fprintf(stderr, "synth: warning: the kernel dropped %d records (samples or side-band): the rings filled faster than synth read them;"+
			" the output marks them with PERF_RECORD_LOST; lower -F or raise --ring-pages\n", s.LiveLost)
	}
	if s.Throttled > 0 {
		fmt.Fprintf(stderr, "synth: warning: the kernel throttled sampling %d times (its interrupts took more than kernel.perf_cpu_time_max_percent);"+
			" the output has the THROTTLE records; lower -F\n", s.Throttled)
	}
	if s.Lost > 0 {
		fmt.Fprintf(stderr, "synth: the dump lost %d records: the profile is incomplete (try a larger --ring-pages)\n", s.Lost)
		return exitError
	}
	return exitOK
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
