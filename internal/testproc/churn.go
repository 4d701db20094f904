package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// churnKeep is how many churn mappings stay mapped at a time.
const churnKeep = 32

// churnReapAfter is how long a churning process leaves a child of
// those it reaps late unreaped.
const churnReapAfter = 150 * time.Millisecond

// ChurnPrefix starts the base name of every file a churning process maps.
const ChurnPrefix = "churn-"

// churn changes the process's mappings until it exits. Every file is
// mapped once, so two identical records of it can only be a duplicate.
// It also starts short children (/bin/true), some reaped at once, some
// left zombies for churnReapAfter, and those for good once paused.
func (c *child) churn() {
	type mapping struct {
		mem  []byte
		path string
	}
	var live []mapping
	// Children reaped late: zombies for a while, and for good once the
	// churn is paused.
	type child struct {
		cmd     *exec.Cmd
		started time.Time
	}
	var late []child
	for i := 0; ; i++ {
		path := filepath.Join(c.spec.Dir, fmt.Sprintf("%s%d-%d", ChurnPrefix, os.Getpid(), i))
		mem, err := mapNew(path)
		if err != nil {
			fail(err)
		}
		if i%3 == 0 {
			os.Remove(path) // mapped from here on as "path (deleted)"
		}
		live = append(live, mapping{mem, path})
		if i%5 == 0 {
			// Split the new mapping: its first page loses exec.
			if err := unix.Mprotect(mem[:page], unix.PROT_READ); err != nil {
				fail(err)
			}
		}
		if len(live) > churnKeep {
			old := live[0]
			live = live[1:]
			if err := unix.Munmap(old.mem); err != nil {
				fail(err)
			}
			os.Remove(old.path)
		}
		switch i % 16 {
		case 0:
			_ = exec.Command("/bin/true").Run() // fork, exec, exit, reaped at once
		case 8:
			if cmd := exec.Command("/bin/true"); cmd.Start() == nil {
				late = append(late, child{cmd, time.Now()})
			}
		}
		for len(late) > 0 && time.Since(late[0].started) > churnReapAfter {
			_ = late[0].cmd.Wait()
			late = late[1:]
		}
		select {
		case paused := <-c.pause:
			close(paused)
			select {} // until the process is stopped
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// pauseChurn is the command "pause" of Proc.Pause: it returns once the
// churn has stopped changing the process.
func (c *child) pauseChurn() error {
	if c.pause == nil {
		return fmt.Errorf("pause: the process does not churn")
	}
	paused := make(chan struct{})
	c.pause <- paused
	<-paused
	return nil
}

// mapNew maps a new two-page file r-x, private.
func mapNew(path string) ([]byte, error) {
	f, err := writeFile(path, 2)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 2*page, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return mem, nil
}
