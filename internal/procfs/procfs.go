package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one line of /proc/PID/maps (fs/proc/task_mmu.c show_map_vma).
type Mapping struct {
	Start, End uint64
	Prot       uint32 // PROT_READ 1 | PROT_WRITE 2 | PROT_EXEC 4
	Shared     bool
	Pgoff      uint64
	Maj, Min   uint32
	Ino        uint64
	Path       string // "" for an anonymous mapping; " (deleted)" kept
}

// Flags returns MAP_SHARED (1) or MAP_PRIVATE (2), as MMAP2 records
// carry them.
func (m Mapping) Flags() uint32 {
	if m.Shared {
		return 1
	}
	return 2
}

// maxLine bounds one maps line: the fields and a PATH_MAX path.
const maxLine = 4096 + 256

// ParseMaps parses /proc/PID/maps text.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var maps []Mapping
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("maps line %d: longer than %d bytes", n, br.Size())
		}
		if len(line) > 0 {
			m, perr := parseLine(bytes.TrimSuffix(line, []byte("\n")))
			if perr != nil {
				return nil, fmt.Errorf("maps line %d: %w", n, perr)
			}
			maps = append(maps, m)
		}
		if err == io.EOF {
			return maps, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// parseLine reads "start-end perms offset maj:min inode   path".
func parseLine(line []byte) (Mapping, error) {
	var m Mapping
	if len(line) > maxLine {
		return m, fmt.Errorf("line of %d bytes", len(line))
	}
	rest := string(line)
	var f [5]string
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		end := strings.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		f[i], rest = rest[:end], rest[end:]
	}
	if f[4] == "" {
		return m, fmt.Errorf("malformed %q", line)
	}
	// The path starts after the padding that follows the inode. A file's
	// path starts with '/' and the other names with '[', so trimming the
	// padding cannot eat a name; spaces inside the path are kept (the
	// kernel escapes only '\n', as "\012").
	m.Path = strings.TrimLeft(rest, " ")
	lo, hi, ok := strings.Cut(f[0], "-")
	maj, min, ok2 := strings.Cut(f[3], ":")
	var errs [6]error
	m.Start, errs[0] = strconv.ParseUint(lo, 16, 64)
	m.End, errs[1] = strconv.ParseUint(hi, 16, 64)
	m.Pgoff, errs[2] = strconv.ParseUint(f[2], 16, 64)
	ma, e3 := strconv.ParseUint(maj, 16, 32)
	mi, e4 := strconv.ParseUint(min, 16, 32)
	errs[3], errs[4] = e3, e4
	m.Ino, errs[5] = strconv.ParseUint(f[4], 10, 64)
	if !ok || !ok2 || len(f[1]) != 4 || errors.Join(errs[:]...) != nil {
		return m, fmt.Errorf("malformed %q", line)
	}
	m.Maj, m.Min = uint32(ma), uint32(mi)
	m.setPerms(f[1][0], f[1][1], f[1][2], f[1][3])
	return m, nil
}

// setPerms reads the permission column, "rwxp" or "rwxs" with '-' for a
// permission not given.
func (m *Mapping) setPerms(r, w, x, s byte) {
	if r == 'r' {
		m.Prot |= 1
	}
	if w == 'w' {
		m.Prot |= 2
	}
	if x == 'x' {
		m.Prot |= 4
	}
	m.Shared = s == 's'
}

// ReadMaps reads /proc/PID/maps. A process that is gone gives an error
// that matches os.ErrNotExist.
func ReadMaps(pid int) ([]Mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, fmt.Errorf("read maps of pid %d: %w", pid, err)
	}
	defer f.Close()
	maps, err := ParseMaps(f)
	if err != nil {
		return nil, fmt.Errorf("read maps of pid %d: %w", pid, err)
	}
	return maps, nil
}

// ReadComms returns the name of every thread of process pid, by tid.
// Threads that exit while they are read are left out.
func ReadComms(pid int) (map[int]string, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read threads of pid %d: %w", pid, err)
	}
	comms := make(map[int]string, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errESRCH) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read comm of tid %d: %w", tid, err)
		}
		comms[tid] = strings.TrimSuffix(string(b), "\n")
	}
	return comms, nil
}

// Pids returns the processes in /proc, ascending.
func Pids() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// Tgid returns the process (thread group) of task tid, from its
// /proc/TID/status; /proc reaches threads by their ids too. A task that
// does not exist gives an error satisfying errors.Is(err, fs.ErrNotExist).
func Tgid(tid int) (int, error) {
	st, err := Status(tid)
	return st.Tgid, err
}

// TaskStatus is what synth reads of /proc/TID/status.
type TaskStatus struct {
	Tgid int
	PPid int // the parent process; 0 for init and kthreadd
}

// Status reads /proc/TID/status. A task that does not exist gives an
// error satisfying errors.Is(err, fs.ErrNotExist).
func Status(tid int) (TaskStatus, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if errors.Is(err, errESRCH) {
		err = fs.ErrNotExist // it exited as it was read
	}
	if err != nil {
		return TaskStatus{}, fmt.Errorf("task %d: %w", tid, err)
	}
	st := TaskStatus{Tgid: -1, PPid: -1}
	for line := range bytes.Lines(b) {
		key, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int
		switch string(key) {
		case "Tgid":
			dst = &st.Tgid
		case "PPid":
			dst = &st.PPid
		default:
			continue
		}
		n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
		if err != nil || n < 0 {
			return TaskStatus{}, fmt.Errorf("task %d: bad %s line %q", tid, key, bytes.TrimSpace(line))
		}
		*dst = n
	}
	if st.Tgid <= 0 || st.PPid < 0 {
		return TaskStatus{}, fmt.Errorf("task %d: no Tgid or PPid in its status", tid)
	}
	return st, nil
}

// Owner returns the owner of /proc/PID: the effective user of the
// process, or root for one that is not dumpable. perf record -u selects
// processes by it.
func Owner(pid int) (uint32, error) {
	var st unix.Stat_t
	err := unix.Stat("/proc/"+strconv.Itoa(pid), &st)
	if errors.Is(err, unix.ENOENT) {
		err = os.ErrNotExist
	}
	if err != nil {
		return 0, fmt.Errorf("owner of pid %d: %w", pid, err)
	}
	return st.Uid, nil
}

// pfExiting is PF_EXITING (include/linux/sched.h): do_exit() sets it
// before the task lets go of its mm.
const pfExiting = 0x4

// Exiting reports whether process pid is gone, or on its way out: its
// flags (the 9th field of /proc/PID/stat) have PF_EXITING. A process
// whose mm a reader was walking is then losing its mappings, and what
// the reader saw of them may be a part.
func Exiting(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// After the comm's closing parenthesis: state, ppid, pgrp, session,
	// tty_nr, tpgid, flags.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return true
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err != nil || flags&pfExiting != 0 || f[0] == "Z" || f[0] == "X"
}

// sigkillBit is SIGKILL's bit in the pending masks of /proc/PID/status.
const sigkillBit = 1 << (9 - 1)

// Killed reports whether thread tid is gone, or has SIGKILL pending: a
// fatal signal to its process and exit_group(2) (complete_signal(),
// zap_other_threads() in kernel/signal.c) set SIGNAL_GROUP_EXIT, which
// /proc does not show, and queue SIGKILL to each thread, which it does
// (SigPnd), until the thread takes it on its way to do_exit(). So a
// thread of a dying process that has not reached do_exit() (one waiting
// uninterruptibly, on a FUSE server say) is told from a thread whose
// leader exited alone, which goes on running the process.
func Killed(tid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil || mask&sigkillBit != 0 {
			return true
		}
	}
	return false
}
