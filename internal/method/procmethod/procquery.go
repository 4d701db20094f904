package procmethod

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/procfs"
)

// procmapQuery mirrors struct procmap_query (include/uapi/linux/fs.h,
// Linux 6.11+); x/sys has no wrapper.
type procmapQuery struct {
	Size        uint64
	QueryFlags  uint64
	QueryAddr   uint64
	VMAStart    uint64
	VMAEnd      uint64
	VMAFlags    uint64
	VMAPageSize uint64
	VMAOffset   uint64
	Inode       uint64
	DevMajor    uint32
	DevMinor    uint32
	VMANameSize uint32
	BuildIDSize uint32
	VMANameAddr uint64
	BuildIDAddr uint64
}

const (
	// PROCMAP_QUERY = _IOWR('f', 17, struct procmap_query)
	procmapQueryIoctl = 3<<30 | uint(unsafe.Sizeof(procmapQuery{}))<<16 | 'f'<<8 | 17

	pmqReadable       = 0x01
	pmqWritable       = 0x02
	pmqExecutable     = 0x04
	pmqShared         = 0x08
	pmqCoveringOrNext = 0x10
)

// NewProcquery returns the procquery method: it asks the PROCMAP_QUERY
// ioctl of /proc/PID/maps for each VMA, reads the build ID of each file
// once per dump from the file (see procIDs), and reads task comms from
// /proc, with a pool of threads workers.
func NewProcquery(opts config.Resolved, threads int) (*Method, error) {
	if err := probeProcquery(); err != nil {
		return nil, err
	}
	gate, err := assemble.FindGate()
	if err != nil {
		return nil, err
	}
	m, err := newProcMethod(config.MethodProcquery, opts, threads, func(o *config.Resolved) mapReader {
		return newQueryReader(gate, !o.Data)
	})
	if err != nil {
		return nil, err
	}
	m.ids = newProcIDs(opts.BuildIDWait())
	return m, nil
}

// ErrNoProcquery reports a kernel without PROCMAP_QUERY (before 6.11).
var ErrNoProcquery = errors.New("PROCMAP_QUERY ioctl not supported by this kernel")

func probeProcquery() error {
	err := newQueryReader(nil, false).read(os.Getpid(), func(*procfs.Mapping) {})
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
		return ErrNoProcquery
	}
	return err
}

// queryReader walks the VMAs of a process with PROCMAP_QUERY and appends
// the gate area, which /proc/PID/maps shows but the VMA tree does not
// hold.
//
// With execOnly the kernel skips the VMAs that are not executable
// (PROCMAP_QUERY_VMA_EXECUTABLE): one ioctl per executable VMA, instead
// of one per VMA. It then asks without the name, which costs the kernel
// a d_path(): a file it has seen in this dump, in the same mount
// namespace, is named as it was then, and only the first mapping of a
// file, or a VMA with no inode, takes a second ioctl for its name. The
// mount namespace is in the key because the same file mapped through
// another mount has another path; two hard links to one file in one
// namespace are named by the first one seen, with the same build ID.
// With Options.Data (--data) every VMA is asked for with its name, in
// one ioctl. The caches belong to one worker of one dump: a later dump
// sees renames and deletions.
type queryReader struct {
	gate     *assemble.Gate
	execOnly bool
	name     []byte
	names    map[nameKey]string // files this worker has named in this dump
	anon     map[string]string  // names of VMAs without a file, interned
	mp       procfs.Mapping
}

// nameKey is a file as seen from one mount namespace.
type nameKey struct {
	mntns uint64
	fileKey
}

func keyOf(q *procmapQuery, mntns uint64) nameKey {
	return nameKey{mntns, fileKey{q.DevMajor, q.DevMinor, q.Inode}}
}

func newQueryReader(gate *assemble.Gate, execOnly bool) *queryReader {
	return &queryReader{gate: gate, execOnly: execOnly, name: make([]byte, 4096),
		names: make(map[nameKey]string), anon: make(map[string]string)}
}

func (r *queryReader) read(pid int, fn func(*procfs.Mapping)) error {
	f, err := os.Open(pidPath(pid, "maps"))
	if err != nil {
		return fmt.Errorf("query maps of pid %d: %w", pid, err)
	}
	defer f.Close()
	fd := f.Fd()
	mntns, cache := procfs.MountNS(pid)
	var flags uint64 = pmqCoveringOrNext
	if r.execOnly {
		flags |= pmqExecutable
	}
	found := false
	for addr := uint64(0); ; {
		var q procmapQuery
		errno := r.query(fd, &q, addr, flags, !r.execOnly)
		if errno == unix.ENOENT {
			break // no VMA at or after addr
		}
		if errno != 0 {
			return fmt.Errorf("query maps of pid %d: %w", pid, errno)
		}
		addr = q.VMAEnd
		path, named := r.known(&q, mntns, cache)
		if !named {
			// The same VMA again, with its name: the one covering its
			// start, if it is still executable.
			errno = r.query(fd, &q, q.VMAStart, flags&^pmqCoveringOrNext, true)
			if errno == unix.ENOENT {
				continue // unmapped or changed since: as if not seen
			}
			if errno != 0 {
				return fmt.Errorf("query maps of pid %d: %w", pid, errno)
			}
			addr = q.VMAEnd
			path = r.remember(&q, mntns, cache)
		}
		r.mp = toMapping(&q, path)
		fn(&r.mp)
		found = true
	}
	if r.gate != nil && found && !compat(pid) {
		r.mp = procfs.Mapping{Start: r.gate.Start, End: r.gate.End, Prot: r.gate.Prot, Path: assemble.GateName}
		fn(&r.mp)
	}
	return nil
}

// known returns the name of q's VMA if the query brought it (not
// execOnly), or if its file was named before in mount namespace mntns.
func (r *queryReader) known(q *procmapQuery, mntns uint64, cache bool) (string, bool) {
	if !r.execOnly {
		return r.remember(q, mntns, cache), true
	}
	if !cache || q.Inode == 0 {
		return "", false
	}
	path, ok := r.names[keyOf(q, mntns)]
	return path, ok
}

// remember returns the name the kernel wrote for q into r.name, a file's
// path as /proc/PID/maps shows it, or a name such as [vdso], and keeps
// it: the string is made once per name.
func (r *queryReader) remember(q *procmapQuery, mntns uint64, cache bool) string {
	if q.VMANameSize <= 1 {
		return "" // the size counts the NUL
	}
	b := r.name[:q.VMANameSize-1]
	if q.Inode == 0 {
		if s, ok := r.anon[string(b)]; ok {
			return s
		}
		s := string(b)
		r.anon[s] = s
		return s
	}
	key := keyOf(q, mntns)
	if s, ok := r.names[key]; ok && s == string(b) {
		return s
	}
	s := string(b)
	if cache {
		r.names[key] = s
	}
	return s
}

// query asks for the VMA at or after addr as flags say, with its name
// in r.name if withName.
func (r *queryReader) query(fd uintptr, q *procmapQuery, addr, flags uint64, withName bool) unix.Errno {
	*q = procmapQuery{Size: uint64(unsafe.Sizeof(*q)), QueryFlags: flags, QueryAddr: addr}
	if withName {
		q.VMANameSize = uint32(len(r.name))
		q.VMANameAddr = uint64(uintptr(unsafe.Pointer(&r.name[0])))
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, uintptr(procmapQueryIoctl), uintptr(unsafe.Pointer(q)))
	runtime.KeepAlive(r.name)
	return errno
}

// compat reports whether process pid runs a 32-bit executable (i386 or
// x32), whose mm has no [vsyscall] page: /proc/PID/maps lists none.
func compat(pid int) bool {
	f, err := os.Open(pidPath(pid, "exe"))
	if err != nil {
		return false
	}
	defer f.Close()
	var ident [5]byte
	_, err = f.ReadAt(ident[:], 0)
	return err == nil && string(ident[:4]) == "\x7fELF" && ident[4] == 1 // ELFCLASS32
}

func toMapping(q *procmapQuery, path string) procfs.Mapping {
	m := procfs.Mapping{
		Start: q.VMAStart, End: q.VMAEnd, Pgoff: q.VMAOffset, Ino: q.Inode,
		Maj: q.DevMajor, Min: q.DevMinor, Shared: q.VMAFlags&pmqShared != 0, Path: path,
	}
	if q.VMAFlags&pmqReadable != 0 {
		m.Prot |= unix.PROT_READ
	}
	if q.VMAFlags&pmqWritable != 0 {
		m.Prot |= unix.PROT_WRITE
	}
	if q.VMAFlags&pmqExecutable != 0 {
		m.Prot |= unix.PROT_EXEC
	}
	return m
}
