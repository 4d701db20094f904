package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/kcache"
	"github.com/synth-dev/synth/internal/perfring"
	"github.com/synth-dev/synth/internal/testenv"
)

// TestScripts runs testdata/script/*.txtar: the command lines a user
// types, and what synth answers, as a table. The flags, the messages
// and the exit statuses are tested here, as cmd/go's are; what compares
// with perf's output or needs the kernel's behaviour stays in Go tests. Inside them synth is this
// test binary (see TestMain). Conditions: [root] (the scripts that
// record or dump need it; CI runs them as root), [pmu] (the CPU's
// hardware events are there: not in most VMs), [perf], [cpu1] (CPU 1
// is online).
//
// Commands beyond testscript's:
//
//	status N cmd args...   runs cmd, as exec does, and wants exit status N,
//	                       or with N a signal (SIGTERM), its death by it
//	spawn VAR SECONDS      starts sleep SECONDS, its pid in $VAR
//
// $UNUSED_PID is a pid no process has. For the scripts that run synth
// as another user: $SHARED_SYNTH is synth where every user may run it
// (the synth in $PATH is in a directory only root may enter), and
// $PUBLIC a directory every user may write in.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("UNUSED_PID", strconv.Itoa(testenv.UnusedPid(t)))
			env.Setenv("SHARED_SYNTH", synthBin)
			pub, err := os.MkdirTemp("", "synth-public")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(pub) })
			env.Setenv("PUBLIC", pub)
			return os.Chmod(pub, 0o777)
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "pmu":
				m, _ := filepath.Glob("/sys/bus/event_source/devices/cpu*")
				arm, _ := filepath.Glob("/sys/bus/event_source/devices/armv8*")
				return len(m)+len(arm) > 0, nil
			case "perf":
				_, err := exec.LookPath("perf")
				return err == nil, nil
			case "kernelcache":
				_, err := kcache.CurrentKey([32]byte{})
				return err == nil, nil
			case "cpu1":
				cpus, err := perfring.OnlineCPUs()
				return slices.Contains(cpus, 1), err
			}
			return false, errors.New("unknown condition " + cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"status": cmdStatus,
			"spawn":  cmdSpawn,
		},
	})
}

// cmdStatus is "status N cmd args...".
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N cmd args...")
	}
	want := args[0]
	if _, err := strconv.Atoi(want); err != nil && unix.SignalNum(want) == 0 {
		ts.Fatalf("status %s: want a number or a signal", want)
	}
	err := ts.Exec(args[1], args[2:]...)
	got := "0"
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = strconv.Itoa(ee.ExitCode())
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			got = unix.SignalName(ws.Signal())
		}
	case err != nil:
		ts.Fatalf("%v", err)
	}
	if got != want {
		ts.Fatalf("exit status %s, want %s", got, want)
	}
}

// cmdSpawn is "spawn VAR SECONDS": a process to target, ended with the
// script.
func cmdSpawn(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: spawn VAR SECONDS")
	}
	cmd := exec.Command("sleep", args[1])
	if err := cmd.Start(); err != nil {
		ts.Fatalf("%v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	ts.Defer(func() {
		cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	})
	ts.Setenv(args[0], strconv.Itoa(cmd.Process.Pid))
}
