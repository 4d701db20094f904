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

	"github.com/synth-dev/synth/internal/workload"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// workloadGrace is how long an interrupted recording waits for its
// workload to end after SIGTERM before it kills it.
const workloadGrace = 500 * time.Millisecond

func runRecord(ctx context.Context, args []string, stdout *os.File, stderr io.Writer) int {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	var (
		freq      = fs.Uint64("F", synth.DefaultSampleFreq, "sample at `HZ`")
		all       = fs.Bool("a", false, "profile every CPU and process (the default without -p or a command)")
		callchain = fs.Bool("g", false, "record call chains")
		out       = fs.String("o", "perf.data", "write to `FILE` (a previous one is kept as FILE.old); - for stdout in pipe mode")
		noBuildID = fs.Bool("no-buildid", false, "identify files by maj/min/ino instead of build ID")
		nsFlag    = fs.Bool("namespaces", false, "record NAMESPACES for every task, as perf record --namespaces")
		cgroups   = fs.Bool("all-cgroups", false, "record CGROUP for every cgroup, as perf record --all-cgroups")
		noBPF     = fs.Bool("no-bpf-event", false, "record no BPF_EVENT records (KSYMBOLs stay), as perf record --no-bpf-event")
		ringPages = fs.Int("ring-pages", 0, fmt.Sprintf("per-CPU ring size in `pages`: a power of two >= %d (default %d)", synth.MinRingPages, synth.DefaultRingPages))
		maxFiles  = fs.Int("switch-max-files", 0, "with --switch-output, keep only the `N` newest files")
		switchOut switchFlag
	)
	fs.Var(&switchOut, "switch-output", "close the output and start FILE.<timestamp> on SIGUSR2 (`signal`), once it holds SIZE (10M), or every TIME (30s);"+
		" each file starts with a dump of the state")
	tf := addTargetFlags(fs, "profile")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: synth record [-F HZ] [-a | -p PID,... | -t TID,... | -u USER | -G CGROUP] [-g] [-o FILE]\n                    [--namespaces] [--all-cgroups] [--no-bpf-event] [--no-buildid] [--ring-pages N]\n                    [--switch-output[=signal|SIZE|TIME] [--switch-max-files N]] [-- CMD ARGS]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	opts := synth.ProfileOptions{Freq: *freq, Callchain: *callchain, Options: synth.Options{NoBuildID: *noBuildID,
		RingPages: *ringPages, Namespaces: *nsFlag, Cgroups: *cgroups, NoBPFEvent: *noBPF}}
	if err := opts.Check(); err != nil {
		return usageError(stderr, "record: %v", err)
	}
	target, err := tf.target()
	if err != nil {
		return usageError(stderr, "record: %v", err)
	}
	command := fs.Args()
	switch {
	case *all && (tf.set() || len(command) > 0):
		return usageError(stderr, "record: -a takes neither a target (-p, -t, -u, -G) nor a command")
	case tf.set() && len(command) > 0:
		return usageError(stderr, "record: a target (-p, -t, -u, -G) takes no command")
	case *freq == 0:
		return usageError(stderr, "record: -F 0: want a frequency above 0")
	case switchOut.set && *out == "-":
		return usageError(stderr, "record: --switch-output writes files: not with -o -")
	case switchOut.set && !regularOrNew(*out):
		return usageError(stderr, "record: --switch-output renames -o %s: want a regular file or a new name", *out)
	case *maxFiles < 0 || *maxFiles > 0 && !switchOut.set:
		return usageError(stderr, "record: --switch-max-files N: want N >= 0, with --switch-output")
	}
	if *out == "-" {
		if err := checkStdout(stdout); err != nil {
			return usageError(stderr, "record: %v", err)
		}
	}
	opts.Freq = limitFreq(opts.Freq, stderr)
	if opts.Pids, err = target.Processes(); err != nil {
		return fail(stderr, err)
	}
	opts.Tids, opts.Cgroup = target.Tids, target.Cgroup
	var wopts synth.WriteOptions
	if *out == "-" {
		wopts.Mode = perfdata.ModePipe
	}
	var cmd *workload.Cmd
	if len(command) > 0 {
		// Stopped before it runs its command: nothing happens if a
		// check below fails.
		if cmd, err = workload.Start(command); err != nil {
			return startFailed(stderr, command[0], err)
		}
		defer cmd.Stop(workloadGrace)
		opts.Pids = []int{cmd.Process.Pid}
		opts.OnExec = true
		opts.Done = cmd.Exited()
		opts.Started = func() {
			if err := cmd.Go(); err != nil {
				fmt.Fprintf(stderr, "synth: %v\n", err)
			}
		}
	}
	p, err := synth.NewProfiler(opts)
	if err != nil {
		return fail(stderr, err)
	}
	// Only now, with every check passed, is the output replaced.
	st, err := runProfiler(ctx, p, *out, stdout, stderr, switchOut, *maxFiles, wopts)
	code := exitOK
	if cmd != nil {
		code = workload.ExitCode(cmd.Stop(workloadGrace))
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, err)
	}
	return max(code, recordSummary(stderr, st))
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
func recordSummary(stderr io.Writer, st synth.ProfileStats) int {
	s := st.Session
	fmt.Fprintf(stderr, "synth: recorded %d samples, %d mappings synthesized, %d live records, %d lost, %v\n",
		s.Samples, st.Dump.Mappings, s.Live, s.Lost, st.Duration.Round(time.Millisecond))
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
		fmt.Fprintf(stderr, "synth: %d records lost: the profile is incomplete (try a larger --ring-pages or a lower -F)\n", s.Lost)
		return exitError
	}
	return exitOK
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
