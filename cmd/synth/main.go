package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	// First, so that its init catches the signals before the other
	// packages' inits run.
	"github.com/synth-dev/synth/cmd/synth/internal/endsig"
	"github.com/synth-dev/synth/cmd/synth/internal/loadgen"
	"github.com/synth-dev/synth/cmd/synth/internal/workload"

	"github.com/synth-dev/synth/cmd/synth/internal/bench/floor"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the job failed (missing privilege, unwritable output, lost records)
	exitUsage = 2 // bad command line
)

func main() {
	loadgen.Main()  // a load process of synth bench or loadgen never returns
	workload.Main() // nor does the command of synth record
	floor.Main()    // nor a floor row of synth bench (it is no command)
	code := run()
	if code < 0 {
		// The workload's signal comes before the one synth got, as in
		// perf record.
		endsig.Die(syscall.Signal(-code))
	}
	endsig.Exit(code)
}

// diedOf is run's status for a command that passes on the signal its
// workload died of: synth dies of it once its output is complete, as
// perf record re-raises it.
func diedOf(sig syscall.Signal) int { return -int(sig) }

func run() int {
	// A closed output pipe must be an error the dump reports, not a
	// silent SIGPIPE death.
	signal.Ignore(syscall.SIGPIPE)
	// The first SIGINT, SIGTERM, SIGHUP or SIGQUIT ends the command
	// cleanly, its output closed off as valid; those after it are
	// swallowed, however many and whenever they come, as perf record's:
	// only SIGKILL cuts the output short. Then synth dies of it (main).
	ctx, stop := endsig.Context(context.Background())
	defer stop()
	if len(os.Args) < 2 {
		usage(os.Stderr)
		return exitUsage
	}
	name, args := os.Args[1], os.Args[2:]
	if cmd, ok := commands[name]; ok {
		return cmd(ctx, args)
	}
	switch name {
	case "help":
		return runHelp(ctx, args)
	case "-h", "-help", "--help":
		usage(os.Stdout)
		return exitOK
	case "version", "-version", "--version":
		fmt.Println(version())
		return exitOK
	default:
		fmt.Fprintf(os.Stderr, "synth: unknown command %q\n", name)
		usage(os.Stderr)
		return exitUsage
	}
}

// commands are synth's commands, each run with its arguments.
var commands = map[string]func(ctx context.Context, args []string) int{
	"dump": func(ctx context.Context, args []string) int {
		return runDump(ctx, args, os.Stdout, os.Stderr)
	},
	"record": func(ctx context.Context, args []string) int {
		return runRecord(ctx, args, os.Stdout, os.Stderr)
	},
	"inject": func(ctx context.Context, args []string) int {
		return runInject(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	},
	"convert": func(ctx context.Context, args []string) int {
		return runConvert(ctx, args, os.Stdout, os.Stderr)
	},
	"bench": func(ctx context.Context, args []string) int {
		return runBench(ctx, args, os.Stdout, os.Stderr)
	},
	"loadgen": func(ctx context.Context, args []string) int {
		return runLoadgen(ctx, args, os.Stdout, os.Stderr)
	},
}

// runHelp is synth help [COMMAND]: the usage, or the command's help, as
// perf help record is perf record's.
func runHelp(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage(os.Stdout)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "synth help: unknown command %q\n", args[0])
		usage(os.Stderr)
		return exitUsage
	}
	return cmd(ctx, []string{"-h"})
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: synth <command> [flags]

commands:
  dump     write a perf.data with the mappings of every existing process
  record   sample the CPUs, like a minimal perf record, on a session
  inject   add the host's state to perf record's pipe: perf record -o - | synth inject
  convert  turn a perf.data (synth's or perf's) into pprof or OpenTelemetry profiles
  bench    compare every synthesis method, and perf's, on this host
  loadgen  hold load processes with many VMAs, to benchmark by hand

Run 'synth help record' or 'synth record -h' for the flags of a command;
'synth --version' for the version.
`)
}

// version describes the build: the module version (a tag, or a pseudo-
// version from the VCS), the commit when the build recorded it, and Go.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "synth (unknown version)"
	}
	v := "synth " + bi.Main.Version
	if bi.Main.Version != "(devel)" {
		return v + " " + bi.GoVersion // a pseudo-version names the commit
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			v += " " + s.Value[:min(12, len(s.Value))]
		case s.Key == "vcs.modified" && s.Value == "true":
			v += "+dirty"
		}
	}
	return v + " " + bi.GoVersion
}

// fail prints err as the command's one-line error and returns the exit
// status for it; a command a signal cut short dies of the signal
// instead (endsig.Exit).
func fail(stderr io.Writer, err error) int {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "synth: interrupted; the output holds what was dumped so far")
		return exitError
	}
	fmt.Fprintf(stderr, "synth: %v\n", err)
	return exitError
}
