package loadgen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/synth-dev/synth/internal/hostarch"
)

const envVMAs = "SYNTH_LOADGEN_VMAS"

// Load is a set of running load processes.
type Load struct {
	procs []*exec.Cmd
	ins   []io.WriteCloser
	VMAs  int // VMAs the processes made, in all
}

// Start starts procs processes of about vmas VMAs each.
func Start(procs, vmas int) (*Load, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	l := &Load{}
	for range procs {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envVMAs+"="+strconv.Itoa(vmas))
		in, err := cmd.StdinPipe()
		if err != nil {
			l.Stop()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			l.Stop()
			return nil, err
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			l.Stop()
			return nil, fmt.Errorf("start load process: %w", err)
		}
		l.procs, l.ins = append(l.procs, cmd), append(l.ins, in)
		line, err := bufio.NewReader(out).ReadString('\n')
		n, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "ready "))
		if err != nil || perr != nil {
			l.Stop()
			return nil, fmt.Errorf("load process: %q %v: %s", line, err, stderr.String())
		}
		l.VMAs += n
	}
	return l, nil
}

// Pids returns the load processes.
func (l *Load) Pids() []int {
	pids := make([]int, len(l.procs))
	for i, p := range l.procs {
		pids[i] = p.Process.Pid
	}
	return pids
}

// Stop ends the processes.
func (l *Load) Stop() error {
	for _, in := range l.ins {
		in.Close()
	}
	var errs []error
	for _, p := range l.procs {
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			errs = append(errs, err)
		case <-time.After(10 * time.Second):
			p.Process.Kill()
			errs = append(errs, <-done)
		}
	}
	l.procs, l.ins = nil, nil
	return errors.Join(errs...)
}

// Main becomes a load process when the binary was started by Start.
func Main() {
	v, ok := os.LookupEnv(envVMAs)
	if !ok {
		return
	}
	n, err := strconv.Atoi(v)
	if err == nil {
		var made int
		made, err = makeVMAs(n)
		if err == nil {
			fmt.Printf("ready %d\n", made)
			io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}
	}
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}

// libraries returns real shared libraries to map, largest first.
func libraries() []string {
	libs, _ := filepath.Glob(filepath.Join(hostarch.LibDir(), "*.so*"))
	var out []string
	for _, l := range libs {
		if fi, err := os.Stat(l); err == nil && fi.Mode().IsRegular() && fi.Size() >= 64<<10 {
			out = append(out, l)
		}
	}
	return out
}
