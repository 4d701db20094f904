package bpfiter

import (
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/bpfsys"
)

// ErrNoProcess reports that a pid-scoped iterator could not be created
// because the process is gone.
var ErrNoProcess = errors.New("no such process")

// Open attaches prog, a task or task_vma iterator program, and opens one
// instance of it: a seq_file whose reads run the program. pid 0 walks
// every task; otherwise only the threads of process pid.
func Open(prog *ebpf.Program, pid int) (io.ReadCloser, error) {
	var (
		it  *link.Iter
		err error
	)
	if pid == 0 {
		it, err = link.AttachIter(link.IterOptions{Program: prog})
	} else {
		it, err = attachTaskIter(prog, pid)
	}
	if err != nil {
		return nil, err
	}
	// The instance holds its own reference to the link.
	defer it.Close()
	return it.Open()
}

// bpfIterLinkInfoTask mirrors the task member of union bpf_iter_link_info
// (include/uapi/linux/bpf.h); the union is 16 bytes.
type bpfIterLinkInfoTask struct {
	Tid   uint32
	Pid   uint32
	PidFd uint32
	_     uint32
}

// bpfLinkCreateIterAttr mirrors the BPF_LINK_CREATE member of union
// bpf_attr for iterators (include/uapi/linux/bpf.h).
type bpfLinkCreateIterAttr struct {
	ProgFd      uint32
	TargetFd    uint32
	AttachType  uint32
	Flags       uint32
	IterInfo    bpfsys.Pointer
	IterInfoLen uint32
	_           [36]byte
}

// attachTaskIter links a task or task_vma iterator to the threads of one
// process. cilium/ebpf's link.AttachIter has no task parameter, so the
// link is created here and handed to cilium/ebpf.
func attachTaskIter(prog *ebpf.Program, pid int) (*link.Iter, error) {
	info := bpfIterLinkInfoTask{Pid: uint32(pid)}
	attr := bpfLinkCreateIterAttr{
		ProgFd:      uint32(prog.FD()),
		AttachType:  unix.BPF_TRACE_ITER,
		IterInfo:    bpfsys.NewPointer(unsafe.Pointer(&info)),
		IterInfoLen: uint32(unsafe.Sizeof(info)),
	}
	fd, err := bpfsys.BPF(unix.BPF_LINK_CREATE, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
		}
		return nil, fmt.Errorf("link iterator to pid %d: %w", pid, err)
	}
	l, err := link.NewFromFD(int(fd))
	if err != nil {
		return nil, fmt.Errorf("wrap iterator link: %w", err)
	}
	it, ok := l.(*link.Iter)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("link %d is a %T, not an iterator", fd, l)
	}
	return it, nil
}

// Drain runs an iterator that emits nothing to its end. A process that is
// gone is not an error: there was nothing to walk.
func Drain(prog *ebpf.Program, pid int) error {
	it, err := Open(prog, pid)
	if err != nil {
		if errors.Is(err, ErrNoProcess) {
			return nil
		}
		return fmt.Errorf("open %s iterator: %w", prog, err)
	}
	defer it.Close()
	if _, err := io.Copy(io.Discard, it); err != nil {
		return fmt.Errorf("read %s iterator: %w", prog, err)
	}
	return nil
}
