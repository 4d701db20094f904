package procdump

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/dump"
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
func NewProcquery(opts dump.Options, threads int) (*Method, error) {
	if err := probeProcquery(); err != nil {
		return nil, err
	}
	gate, err := dump.FindGate()
	if err != nil {
		return nil, err
	}
	m, err := newProcMethod("procquery", opts, threads, func(pid int) ([]procMapping, error) {
		return queryMaps(pid, gate, !opts.Data)
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
	_, err := queryMaps(os.Getpid(), nil, false)
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
		return ErrNoProcquery
	}
	return err
}

// queryMaps walks the VMAs of pid with PROCMAP_QUERY and appends the gate
// area, which /proc/PID/maps shows but the VMA tree does not hold. With
// execOnly the kernel skips the VMAs that are not executable
// (PROCMAP_QUERY_VMA_EXECUTABLE): one ioctl per executable VMA, instead
// of one per VMA.
func queryMaps(pid int, gate *dump.Gate, execOnly bool) ([]procMapping, error) {
	f, err := os.Open(pidPath(pid, "maps"))
	if err != nil {
		return nil, fmt.Errorf("query maps of pid %d: %w", pid, err)
	}
	defer f.Close()
	var (
		maps []procMapping
		name = make([]byte, 4096)
		q    procmapQuery
	)
	flags := uint64(pmqCoveringOrNext)
	if execOnly {
		flags |= pmqExecutable
	}
	for addr := uint64(0); ; {
		q = procmapQuery{
			Size: uint64(unsafe.Sizeof(q)), QueryFlags: flags, QueryAddr: addr,
			VMANameSize: uint32(len(name)), VMANameAddr: uint64(uintptr(unsafe.Pointer(&name[0]))),
		}
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(procmapQueryIoctl), uintptr(unsafe.Pointer(&q)))
		runtime.KeepAlive(name)
		if errno == unix.ENOENT {
			break // no VMA at or after addr
		}
		if errno != 0 {
			return nil, fmt.Errorf("query maps of pid %d: %w", pid, errno)
		}
		maps = append(maps, toMapping(&q, name))
		addr = q.VMAEnd
	}
	if gate != nil && len(maps) > 0 && !compat(pid) {
		maps = append(maps, procMapping{Mapping: procfs.Mapping{Start: gate.Start, End: gate.End,
			Prot: gate.Prot, Path: dump.GateName}})
	}
	return maps, nil
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

func toMapping(q *procmapQuery, name []byte) procMapping {
	m := procMapping{Mapping: procfs.Mapping{
		Start: q.VMAStart, End: q.VMAEnd, Pgoff: q.VMAOffset, Ino: q.Inode,
		Maj: q.DevMajor, Min: q.DevMinor, Shared: q.VMAFlags&pmqShared != 0,
	}}
	if q.VMAFlags&pmqReadable != 0 {
		m.Prot |= unix.PROT_READ
	}
	if q.VMAFlags&pmqWritable != 0 {
		m.Prot |= unix.PROT_WRITE
	}
	if q.VMAFlags&pmqExecutable != 0 {
		m.Prot |= unix.PROT_EXEC
	}
	if q.VMANameSize > 1 {
		m.Path = string(name[:q.VMANameSize-1]) // the size counts the NUL
	}
	return m
}
