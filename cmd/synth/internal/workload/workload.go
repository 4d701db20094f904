package workload

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/cmd/synth/internal/endsig"
)

// envExec names the command the re-executed binary must exec.
const envExec = "SYNTH_WORKLOAD_EXEC"

// goFD is the child's end of the go pipe.
const goFD = 3

// The workload execs on the main thread, the thread group leader: the
// profiler opens its events on that task only, with inherit and
// enable_on_exec, as perf record does for the child it forks, and an
// exec from another thread would leave them on a task that exec ends.
func init() {
	if _, ok := os.LookupEnv(envExec); ok {
		runtime.LockOSThread()
	}
}

// Main becomes the workload when the binary was started by Start: it
// waits for the go byte, then execs the command. It returns at once
// otherwise.
func Main() {
	path, ok := os.LookupEnv(envExec)
	if !ok {
		return
	}
	os.Unsetenv(envExec)
	var b [1]byte
	if n, _ := unix.Read(goFD, b[:]); n != 1 {
		os.Exit(127) // the profiler gave up: do not run the command
	}
	unix.Close(goFD)
	// Until now the signals that end synth were caught (endsig's init),
	// as perf record's child has perf's SIGINT handler until its exec:
	// one sent to the group before the go does not kill a workload the
	// profiler is opening its events on. From the go on they are the
	// command's: the defaults (Stop's SIGTERM waits for the exec). They
	// are SIGINT's and SIGTERM's whatever synth started with, as for
	// perf's workload: synth catches them, and its fork reset them; a
	// SIGHUP ignored under nohup stays ignored.
	signal.Reset(endsig.Signals...)
	err := unix.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "exec %s: %v\n", path, err)
	os.Exit(127)
}

// Cmd is a started workload that has not run its command yet.
type Cmd struct {
	*exec.Cmd
	goPipe *os.File
	let    bool          // Go was called
	killed bool          // Stop sent SIGKILL
	exited chan struct{} // closed once the command has ended, after Go
}

// Start starts args[0], found in PATH, with args, stopped before exec.
// The child's stdin, stdout and stderr are the caller's.
func Start(args []string) (*Cmd, error) {
	if len(args) == 0 {
		return nil, errors.New("no command")
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(self, args...)
	cmd.Args = append([]string{args[0]}, args...) // argv[0] of the exec
	cmd.Env = append(os.Environ(), envExec+"="+path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{r} // fd 3
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &Cmd{Cmd: cmd, goPipe: w, exited: make(chan struct{})}, nil
}

// Go lets the command run; Exited tells when it has ended.
func (c *Cmd) Go() error {
	defer c.goPipe.Close()
	c.let = true
	go func() {
		c.Wait() // its status is in ProcessState
		close(c.exited)
	}()
	if _, err := c.goPipe.Write([]byte{1}); err != nil {
		return fmt.Errorf("start workload: %w", err)
	}
	return nil
}

// Exited is closed once the command has ended; never if it was not let
// go.
func (c *Cmd) Exited() <-chan struct{} { return c.exited }

// Stop ends the workload and returns how it ended. One not let go
// exits without running the command. A running one is sent SIGTERM, as
// perf record sends its workload when interrupted, and SIGKILL if it
// has not ended after grace.
func (c *Cmd) Stop(grace time.Duration) *os.ProcessState {
	if !c.let {
		c.goPipe.Close()
		c.Wait()
		return c.ProcessState
	}
	select {
	case <-c.exited:
		return c.ProcessState
	default:
	}
	c.awaitExec(execWait)
	c.Process.Signal(unix.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(grace):
		c.killed = true
		c.Process.Kill()
		<-c.exited
	}
	return c.ProcessState
}

// KilledByStop reports whether Stop ended the command with SIGKILL, as
// perf record never does: it waits for the command its SIGTERM asked to
// end. A SIGKILL of synth's own is no signal of the command's to pass on.
func (c *Cmd) KilledByStop() bool { return c.killed }

// execWait bounds Stop's wait for the command's exec after the go. The
// exec is an event that comes unless the host is stalled: on a loaded
// host it took over half a second, and a SIGTERM sent before it was
// swallowed by the child (endsig), which then died of Stop's SIGKILL.
const execWait = 10 * time.Second

// awaitExec waits, at most max, until the command has replaced the
// child: Stop's SIGTERM is the command's, and one sent just after the go
// could reach the child before it read the go, which swallows it
// (endsig), and the command would run until the SIGKILL. The child's
// /proc environ, its initial one, names envExec until its exec.
func (c *Cmd) awaitExec(max time.Duration) {
	environ := fmt.Sprintf("/proc/%d/environ", c.Process.Pid)
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		select {
		case <-c.exited:
			return
		default:
		}
		b, err := os.ReadFile(environ)
		if err != nil || !bytes.Contains(b, []byte("\x00"+envExec+"=")) && !bytes.HasPrefix(b, []byte(envExec+"=")) {
			return
		}
	}
}

// Status is how the workload ended: its exit status, or the signal that
// killed it (0 if none did).
func Status(st *os.ProcessState) (code int, sig syscall.Signal) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 0, ws.Signal()
	}
	return st.ExitCode(), 0
}
