package synth

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/perfdata"
)

// perfEvent is one perf event opened with perf_event_open(2), and the ring
// buffer mapped on it when it owns one. Events that redirect their output
// (PERF_EVENT_IOC_SET_OUTPUT) have no ring of their own.
type perfEvent struct {
	fd   int
	id   uint64 // PERF_EVENT_IOC_ID
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
	tail uint64
	// wrapped holds a record that wraps around the end of the ring.
	wrapped []byte
}

// openPerfEvent opens attr, described as perf.data describes it, for all
// threads on one CPU (pid -1, system-wide), or for one thread (cpu -1).
func openPerfEvent(a *perfdata.Attr, pid, cpu int) (*perfEvent, error) {
	ua := unix.PerfEventAttr{
		Type:               a.Type,
		Size:               uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Config:             a.Config,
		Sample:             a.SamplePeriod,
		Sample_type:        a.SampleType,
		Read_format:        a.ReadFormat,
		Bits:               a.Flags,
		Wakeup:             a.WakeupEvents,
		Sample_max_stack:   a.SampleMaxStack,
		Clockid:            a.ClockID,
		Sample_regs_user:   a.SampleRegsUser,
		Sample_stack_user:  a.SampleStackUser,
		Branch_sample_type: a.BranchSampleType,
	}
	fd, err := unix.PerfEventOpen(&ua, pid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return nil, &PermissionError{Op: "perf_event_open", Err: err}
		}
		return nil, fmt.Errorf("perf_event_open: %w", err)
	}
	ev := &perfEvent{fd: fd}
	if err := ioctlID(fd, &ev.id); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("perf event id: %w", err)
	}
	return ev, nil
}

func ioctlID(fd int, id *uint64) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_ID, uintptr(unsafe.Pointer(id)))
	if errno != 0 {
		return errno
	}
	return nil
}

// mapRing maps a ring of pages data pages (a power of two) on ev.
func (ev *perfEvent) mapRing(pages int) error {
	ps := os.Getpagesize()
	mem, err := unix.Mmap(ev.fd, 0, (pages+1)*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap perf ring: %w", err)
	}
	ev.mem = mem
	ev.meta = (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	off, size := ev.meta.Data_offset, ev.meta.Data_size
	if off == 0 || size == 0 { // kernels before 4.1
		off, size = uint64(ps), uint64(pages*ps)
	}
	ev.data = mem[off : off+size]
	ev.tail = atomic.LoadUint64(&ev.meta.Data_tail)
	return nil
}

// redirect sends ev's records into the ring of to, which must be open on
// the same CPU.
func (ev *perfEvent) redirect(to *perfEvent) error {
	if err := unix.IoctlSetInt(ev.fd, unix.PERF_EVENT_IOC_SET_OUTPUT, to.fd); err != nil {
		return fmt.Errorf("redirect perf event output: %w", err)
	}
	return nil
}

func (ev *perfEvent) enable() error {
	if err := unix.IoctlSetInt(ev.fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return fmt.Errorf("enable perf event: %w", err)
	}
	return nil
}

// errRingCorrupt is returned when a record header in a ring makes no sense.
var errRingCorrupt = errors.New("perf ring: corrupt record header")

// readAll hands every record now in the ring, header included, to fn, and
// then releases their space. rec is only valid during the call.
func (ev *perfEvent) readAll(fn func(rec []byte) error) error {
	head := atomic.LoadUint64(&ev.meta.Data_head) // acquire: pairs with the kernel's store
	size := uint64(len(ev.data))
	mask := size - 1
	tail := ev.tail
	var err error
	for tail < head && err == nil {
		off := tail & mask
		var hdr [8]byte
		for i := range hdr {
			hdr[i] = ev.data[(off+uint64(i))&mask]
		}
		n := uint64(*(*uint16)(unsafe.Pointer(&hdr[6])))
		if n < 8 || n > head-tail {
			err = fmt.Errorf("%w: size %d with %d bytes left", errRingCorrupt, n, head-tail)
			tail = head // skip what cannot be parsed rather than spin
			break
		}
		var rec []byte
		if off+n <= size {
			rec = ev.data[off : off+n]
		} else {
			ev.wrapped = append(append(ev.wrapped[:0], ev.data[off:]...), ev.data[:off+n-size]...)
			rec = ev.wrapped
		}
		err = fn(rec)
		tail += n
	}
	ev.tail = tail
	atomic.StoreUint64(&ev.meta.Data_tail, tail) // release the space
	return err
}

// pending reports whether the ring holds unread records.
func (ev *perfEvent) pending() bool {
	return atomic.LoadUint64(&ev.meta.Data_head) != ev.tail
}

func (ev *perfEvent) close() error {
	var errs []error
	if ev.mem != nil {
		errs = append(errs, unix.Munmap(ev.mem))
		ev.mem, ev.meta, ev.data = nil, nil, nil
	}
	if ev.fd >= 0 {
		errs = append(errs, unix.Close(ev.fd))
		ev.fd = -1
	}
	return errors.Join(errs...)
}
