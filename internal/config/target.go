package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/synth-dev/synth/internal/procfs"
)

// ErrNoProcess is the error of a target that names no task.
var ErrNoProcess = errors.New("no such process")

// ErrNoMatch is the error of a user or cgroup target that no process
// matches.
var ErrNoMatch = errors.New("no process matches")

// Target selects the processes a dump, a Session or a Profile covers
// (Options.Target), as perf record's target options do. The zero Target
// is the whole host; at most one field may be set.
type Target struct {
	Pids []int // -p: these processes; a thread's id names its process
	// Tids (-t) are threads: their processes' mappings are dumped, and
	// thread records (FORK, NAMESPACES, COMM) only of them and of their
	// processes' leaders, as perf -t writes them; samples only of them.
	Tids []int
	// UID (-u) is a user, by name or number: the processes whose
	// /proc/PID it owns (the effective user, as perf -u reads it).
	UID string
	// Cgroup (-G) is a cgroup, a path in the perf_event or cgroup2
	// hierarchy ("/" its root): the processes in it or below it.
	Cgroup string
}

// Check rejects a target that sets more than one selector.
func (t Target) Check() error {
	n := 0
	for _, set := range []bool{len(t.Pids) > 0, len(t.Tids) > 0, t.UID != "", t.Cgroup != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("a target sets one of Pids, Tids, UID and Cgroup")
	}
	return nil
}

// Processes resolves the target to processes, ascending and each once;
// nil for the whole host. A pid or tid of no task, and a user or cgroup
// no process matches, is an error that names it.
func (t Target) Processes() ([]int, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	switch {
	case len(t.Pids) > 0:
		return Processes(t.Pids)
	case len(t.Tids) > 0:
		return Processes(t.Tids)
	case t.UID != "":
		uid, err := lookupUID(t.UID)
		if err != nil {
			return nil, err
		}
		return matching(fmt.Sprintf("user %s", t.UID), func(pid int) (bool, error) {
			owner, err := procfs.Owner(pid)
			return err == nil && owner == uid, nil
		})
	case t.Cgroup != "":
		return inCgroup(t.Cgroup)
	}
	return nil, nil
}

// Processes returns the processes that ids name, ascending and each
// once: the id of a thread names its process, as perf's -p does. An id
// that names no task is an error that names it and satisfies
// errors.Is(err, ErrNoProcess).
func Processes(ids []int) ([]int, error) {
	var pids []int
	for _, id := range ids {
		tgid, err := procfs.Tgid(id)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %d", ErrNoProcess, id)
		}
		if err != nil {
			return nil, err
		}
		pids = append(pids, tgid)
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// lookupUID reads a user name or number.
func lookupUID(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("user %q: %w", s, err)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("user %q: uid %q", s, u.Uid)
	}
	return uint32(n), nil
}

// inCgroup returns the processes in cgroup path or below it.
func inCgroup(path string) ([]int, error) {
	cg, err := procfs.FindCgroupFS()
	if err != nil {
		return nil, err
	}
	path = "/" + strings.Trim(path, "/")
	if _, err := procfs.CgroupID(cg.Mount + path); err != nil {
		return nil, fmt.Errorf("cgroup %s: no such cgroup in %s", path, cg.Mount)
	}
	return matching("cgroup "+path, func(pid int) (bool, error) {
		p, err := cg.ProcessCgroup(pid)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // exited meanwhile
		}
		if err != nil {
			return false, err
		}
		return path == "/" || p == path || strings.HasPrefix(p, path+"/"), nil
	})
}

// matching returns the processes of the host that match; none is an
// error naming what, satisfying errors.Is(err, ErrNoMatch).
func matching(what string, match func(pid int) (bool, error)) ([]int, error) {
	all, err := procfs.Pids()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, pid := range all {
		ok, err := match(pid)
		if err != nil {
			return nil, err
		}
		if ok {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("%w %s", ErrNoMatch, what)
	}
	return pids, nil
}
