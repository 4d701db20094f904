package testproc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/procfs"
)

// envSpec carries the JSON Spec to the child.
const envSpec = "SYNTH_TESTPROC"

// Spec says which mappings the helper process makes.
type Spec struct {
	Dir       string    // where its files go (StartT uses t.TempDir())
	LongPath  bool      // r-x file, path > 300 characters, at pgoff 0 and 1 page
	MaxPath   bool      // r-x file whose path is 4095 bytes, the longest there is
	SpacePath bool      // r-x file whose path holds spaces
	Deleted   bool      // r-x file unlinked after mapping it
	Memfd     bool      // r-x MAP_SHARED memfd "synth-test"
	AnonExec  bool      // anonymous rwx memory
	DataFile  bool      // r-- private and rw- shared file mappings
	ManyVMAs  int       // at least this many extra, unmergeable VMAs
	Threads   []string  // extra threads, named so
	Maps      []MapSpec // existing files to map r-x, private
	// Churn, after the rest is set up, keeps mapping new files (each
	// once, under a unique name in Dir, some unlinked at once), unmapping
	// old ones, changing protections, and running /bin/true (fork, exec,
	// exit), until the process is stopped. Some of those children it
	// reaps at once, some 150 ms later (zombies meanwhile), and those not
	// reaped when Pause stops the churn stay zombies.
	Churn bool
	// ZombieLeader has the process's main thread, its leader, exit
	// alone once the rest is set up (exit(2), not exit_group(2)): the
	// leader is a zombie, without mm, while the other threads run.
	ZombieLeader bool
}

// MapSpec maps Len bytes of an existing file from offset Off (a page
// multiple); Len 0 maps the rest of the file. The mapping is private and
// read-execute, or with SharedWrite shared and read-write-execute (and
// written once, so that later writes through it take no page fault).
type MapSpec struct {
	Path        string
	Off, Len    int64
	SharedWrite bool
}

// Proc is a running helper process.
type Proc struct {
	Pid   int
	Spec  Spec
	Files []string // files it mapped, as maps names them without " (deleted)"

	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner // the child's stdout, after "ready"
	mu    sync.Mutex     // one command at a time
	once  sync.Once
	err   error
}

// Start starts a helper process and waits until its mappings exist.
func Start(spec Spec) (*Proc, error) {
	if spec.Dir == "" {
		return nil, errors.New("testproc: Spec.Dir is empty")
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envSpec+"="+string(js))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start test process: %w", err)
	}
	p := &Proc{Pid: cmd.Process.Pid, Spec: spec, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	ready := make(chan error, 1)
	go func() { ready <- readReady(p) }()
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = errors.New("not ready after 30s")
	}
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("test process: %w; stderr: %s", err, stderr.String())
	}
	return p, nil
}

// readReady reads the file list and the "ready" line.
func readReady(p *Proc) error {
	sc := p.out
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" {
			return nil
		}
		if f, ok := strings.CutPrefix(line, "file "); ok {
			p.Files = append(p.Files, f)
		}
	}
	return fmt.Errorf("exited before ready: %v", sc.Err())
}

// StartT starts a helper for a test and stops it when the test ends.
func StartT(t testing.TB, spec Spec) *Proc {
	t.Helper()
	if spec.Dir == "" {
		spec.Dir = t.TempDir()
	}
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

// Stop ends the process: it exits when its stdin closes, or is killed
// after 5 s. Stop is idempotent.
func (p *Proc) Stop() error {
	p.once.Do(func() {
		p.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case p.err = <-done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			p.err = <-done
		}
	})
	return p.err
}

// Poke has the process write data at offset off of its mapping of
// Spec.Maps[i]; with protect, the page is made writable for the write
// and read-execute again after it (as a process rewriting its own code).
func (p *Proc) Poke(i int, off int64, data []byte, protect bool) error {
	pr := 0
	if protect {
		pr = 1
	}
	return p.command(fmt.Sprintf("poke %d %d %x %d", i, off, data, pr))
}

// Map has the process map the whole of an existing file read-execute,
// private, as a library loaded after it started.
func (p *Proc) Map(path string) error { return p.command("map " + path) }

// Pause has a churning process (Spec.Churn) stop changing its mappings
// and starting processes, for good; it returns once it has.
func (p *Proc) Pause() error { return p.command("pause") }

// Unmap has the process unmap the last mapping Map made that it has not
// unmapped yet.
func (p *Proc) Unmap() error { return p.command("unmap") }

// Move has the process move the last mapping Map made (mremap(2), a page
// longer) to another address.
func (p *Proc) Move() error { return p.command("move") }

// Shrink has the process cut the last mapping Map made to its first page
// (mremap(2), in place).
func (p *Proc) Shrink() error { return p.command("shrink") }

// NoExec has the process take PROT_EXEC from the first page of the last
// mapping Map made (mprotect(2)).
func (p *Proc) NoExec() error { return p.command("noexec") }

// command sends the process a command line and waits for its answer.
func (p *Proc) command(line string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.stdin, line); err != nil {
		return err
	}
	if !p.out.Scan() {
		return fmt.Errorf("test process %d: no answer: %v", p.Pid, p.out.Err())
	}
	if line := p.out.Text(); line != "ok" {
		return fmt.Errorf("test process %d: %s", p.Pid, line)
	}
	return nil
}

// Maps reads the process's /proc/PID/maps.
func (p *Proc) Maps() ([]procfs.Mapping, error) { return procfs.ReadMaps(p.Pid) }

// Comms reads the names of the process's threads.
func (p *Proc) Comms() (map[int]string, error) { return procfs.ReadComms(p.Pid) }

// InCgroup moves processes pids into a new cgroup, in the perf_event or
// cgroup2 hierarchy, until the test ends, and returns its path there
// ("/name"): a target for -G.
func InCgroup(t testing.TB, pids ...int) string {
	t.Helper()
	cg, err := procfs.FindCgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("synth-test-%d-%d", os.Getpid(), pids[0])
	dir := filepath.Join(cg.Mount, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range pids { // back to the root before the directory goes
			os.WriteFile(filepath.Join(cg.Mount, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		}
		os.Remove(dir)
	})
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	return "/" + name
}
