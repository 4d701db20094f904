package buildid

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/mapread"
	"github.com/synth-dev/synth/internal/procfs"
)

// Filesystems whose pages a shared mapping can change without a new
// modification time: the page stays writable once written, as there is
// no writeback to write-protect it again (statfs(2) f_type).
const (
	tmpfsMagic     = 0x01021994
	ramfsMagic     = 0x858458f6
	hugetlbfsMagic = 0x958458f6
)

// maxReads bounds the reads that run at once.
const maxReads = 16

// Mapping is a mapping of a file by a process: the file is reached
// through its /proc/PID/map_files entry.
type Mapping struct {
	Pid        int
	Start, End uint64
}

// Mapped reports whether the mapping still has its map_files entry. The
// entry's own lstat(2) touches neither the file nor its filesystem.
func (m Mapping) Mapped() bool {
	var st unix.Stat_t
	return unix.Lstat(mapread.Path(m.Pid, m.Start, m.End), &st) == nil
}

// Result is what a read of a file's build ID found.
type Result struct {
	ID []byte // the build ID; nil for none
	// Read: the file was read through; ID is its build ID, or nil for
	// none. Otherwise no mapping led to the file asked for.
	Read bool
	// Volatile: the file's contents may change without a new identity
	// (tmpfs): the result must not be cached.
	Volatile bool
	// Unmapped: the mapping asked for was gone; another process's may
	// lead to the file.
	Unmapped bool
	// Stat is the file's identity and times as read (Read), the same
	// before and after the read.
	Stat mapread.Stat
	// Via is the mapping the file was read through, if it was read
	// through one (ReadAt).
	Via Mapping
}

// Reader reads build IDs from files, each file on a goroutine of its
// own, so that a read that blocks (a FUSE server that does not answer,
// a network filesystem) holds up neither the dump nor the other files.
// A dump waits for its reads until a deadline; a read still running then
// is left behind, and its result serves a later dump that asks for the
// file again. At most one read per key runs at a time, and at most
// maxReads of them within their first timeout. K identifies a file.
type Reader[K comparable] struct {
	mounts  mounts         // which files this process reads itself
	helper  mapread.Helper // reads the others
	mu      sync.Mutex
	running map[K]*Job
	slots   chan struct{}
	timeout time.Duration
}

// Job is one read of a file's build ID.
type Job struct {
	done chan struct{}
	res  Result // set before done is closed
}

// NewReader returns a Reader whose reads give up their slot, and whose
// dumps stop waiting, after timeout.
func NewReader[K comparable](timeout time.Duration) *Reader[K] {
	return &Reader[K]{
		running: make(map[K]*Job),
		slots:   make(chan struct{}, maxReads),
		timeout: timeout,
	}
}

// Close ends the helper process, if one was started.
func (r *Reader[K]) Close() error { return r.helper.Close() }

// Begin starts a dump: the mount tables are read anew when next asked.
// It returns the dump's deadline, and the function that stops its timer.
func (r *Reader[K]) Begin() (expired <-chan struct{}, stop func() bool) {
	r.mounts.reset()
	c := make(chan struct{})
	return c, time.AfterFunc(r.timeout, func() { close(c) }).Stop
}

// Start starts read, the read of the file key names, unless a read of
// it runs already.
func (r *Reader[K]) Start(key K, read func() Result) *Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j, ok := r.running[key]; ok {
		return j
	}
	j := &Job{done: make(chan struct{})}
	r.running[key] = j
	go func() {
		r.slots <- struct{}{}
		// A read that blocks gives its slot up after the timeout.
		var once sync.Once
		release := func() { once.Do(func() { <-r.slots }) }
		t := time.AfterFunc(r.timeout, release)
		j.res = read()
		t.Stop()
		release()
		close(j.done)
	}()
	return j
}

// Wait returns the result of j, or false when expired is closed first.
// A finished read is forgotten: the next Start reads the file anew.
func (r *Reader[K]) Wait(key K, j *Job, expired <-chan struct{}) (Result, bool) {
	select {
	case <-j.done:
	case <-expired:
		select {
		case <-j.done:
		default:
			return Result{}, false
		}
	}
	r.mu.Lock()
	if r.running[key] == j {
		delete(r.running, key)
	}
	r.mu.Unlock()
	return j.res, true
}

// ReadAt reads the build ID of the file mapped at m, on device dev, if
// is says that what the mapping leads to is the file wanted, before and
// after the read, and the file's times did not change meanwhile. A file
// on a filesystem whose reads may never end is read in the helper
// process.
func (r *Reader[K]) ReadAt(m Mapping, dev procfs.Dev, is func(*mapread.Stat) bool) (Result, bool) {
	res, ok := r.read(mapread.Path(m.Pid, m.Start, m.End), dev, m.Pid, is)
	if ok {
		res.Via = m
	}
	return res, ok
}

// ReadPath reads the build ID of the file at path, as this process's
// mount namespace resolves it, under the checks of ReadAt: a mapped
// file whose process has exited can be reached only by its name, which
// may lead to another file by now (is must say which file is wanted).
// Only a regular file on a local filesystem is read, and the path
// never leaves the mount of dev it starts in (mounts.openPath).
func (r *Reader[K]) ReadPath(path string, dev procfs.Dev, is func(*mapread.Stat) bool) (Result, bool) {
	if !r.mounts.local(dev, 0) {
		return Result{}, false
	}
	fd, err := r.mounts.openPath(path, dev, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return Result{}, false
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return r.check(mapread.ReadRegular(f), is)
}

// StatPath returns the identity and times of the file at path, opened
// as ReadPath opens it but not for reading (O_PATH): nothing is read.
func (r *Reader[K]) StatPath(path string, dev procfs.Dev) (mapread.Stat, bool) {
	if !r.mounts.local(dev, 0) {
		return mapread.Stat{}, false
	}
	fd, err := r.mounts.openPath(path, dev, unix.O_PATH)
	if err != nil {
		return mapread.Stat{}, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return mapread.Stat{}, false
	}
	return mapread.StatOf(&st), true
}

// Local reports whether this process reads files on dev itself, as a
// file of process pid (0: this process's mount table only): whether
// they are on a filesystem whose operations end, so that a stat(2) of
// one cannot block for ever.
func (r *Reader[K]) Local(dev procfs.Dev, pid int) bool { return r.mounts.local(dev, pid) }

func (r *Reader[K]) read(path string, dev procfs.Dev, pid int, is func(*mapread.Stat) bool) (Result, bool) {
	var res mapread.Result
	if r.mounts.local(dev, pid) {
		res = mapread.Read(path)
	} else {
		var err error
		if res, err = r.helper.Read(path); err != nil {
			return Result{}, false
		}
	}
	return r.check(res, is)
}

// check makes res a Result if the file read is the one is wants, with
// the same identity and times before and after the read.
func (r *Reader[K]) check(res mapread.Result, is func(*mapread.Stat) bool) (Result, bool) {
	// The contents must not have changed while they were read.
	if !res.Opened || !res.Read || res.Before != res.After || !is(&res.Before) {
		return Result{}, false
	}
	switch uint32(res.FsType) {
	case tmpfsMagic, ramfsMagic, hugetlbfsMagic:
		return Result{ID: res.ID, Read: true, Volatile: true, Stat: res.Before}, true
	}
	return Result{ID: res.ID, Read: true, Stat: res.Before}, true
}

// Kernel reads the running kernel's build ID from /sys/kernel/notes.
func Kernel() []byte {
	b, err := os.ReadFile("/sys/kernel/notes")
	if err != nil {
		return nil
	}
	return elfnote.FromNotes(b, kernelOrder)
}

// Module reads the build ID of a loaded module from the notes the
// kernel shows of it under sysModule (/sys/module):
// NAME/notes/.note.gnu.build-id, as perf's
// dso__kernel_module_get_build_id reads it; nil if it has none.
func Module(sysModule, name string) []byte {
	if name == "" || strings.ContainsAny(name, "/") || name == "." || name == ".." {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(sysModule, name, "notes", ".note.gnu.build-id"))
	if err != nil {
		return nil
	}
	return elfnote.FromNotes(b, kernelOrder)
}
