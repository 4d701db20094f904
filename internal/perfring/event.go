package perfring

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/perfdata"
)

// Event is one perf event opened with perf_event_open(2), and the ring
// mapped on it, if any. Events that send their output to another
// event's ring (SetOutput) have none of their own.
type Event struct {
	fd   int
	id   uint64 // PERF_EVENT_IOC_ID: what sample_id_all's IDENTIFIER says
	mem  []byte
	ring *Ring
}

// Open opens the event a describes, as perf.data describes it, for every
// thread on one CPU (pid -1), or for one thread on every CPU (cpu -1).
// A missing privilege is an error that matches os.ErrPermission; a
// thread that has exited, unix.ESRCH.
func Open(a *perfdata.Attr, pid, cpu int) (*Event, error) {
	return open(a, pid, cpu, 0)
}

// OpenCgroup opens the event a describes on one CPU for the tasks of
// the cgroup whose directory cgroup is open on (PERF_FLAG_PID_CGROUP),
// as perf record -G opens its events.
func OpenCgroup(a *perfdata.Attr, cgroup *os.File, cpu int) (*Event, error) {
	return open(a, int(cgroup.Fd()), cpu, unix.PERF_FLAG_PID_CGROUP)
}

func open(a *perfdata.Attr, pid, cpu, flags int) (*Event, error) {
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
	fd, err := unix.PerfEventOpen(&ua, pid, cpu, -1, flags|unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("perf_event_open: %w", err)
	}
	ev := &Event{fd: fd}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_ID, uintptr(unsafe.Pointer(&ev.id)))
	if errno != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("perf event id: %w", errno)
	}
	return ev, nil
}

// FD returns the event's file descriptor, for poll(2) and for BPF's
// PERF_EVENT_ARRAY.
func (ev *Event) FD() int { return ev.fd }

// ID returns the kernel's id of the event, which its records carry as
// their IDENTIFIER or ID sample field.
func (ev *Event) ID() uint64 { return ev.id }

// Ring returns the event's ring, or nil before MapRing.
func (ev *Event) Ring() *Ring { return ev.ring }

// MapRing maps a ring of pages data pages (a power of two) on ev.
func (ev *Event) MapRing(pages int) error {
	ps := os.Getpagesize()
	mem, err := unix.Mmap(ev.fd, 0, (pages+1)*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap perf ring: %w", err)
	}
	r, err := NewRing(mem, ps)
	if err != nil {
		unix.Munmap(mem)
		return err
	}
	ev.mem, ev.ring = mem, r
	return nil
}

// SetOutput sends ev's records into the ring of to, which must be open
// on the same CPU (PERF_EVENT_IOC_SET_OUTPUT).
func (ev *Event) SetOutput(to *Event) error {
	if err := unix.IoctlSetInt(ev.fd, unix.PERF_EVENT_IOC_SET_OUTPUT, to.fd); err != nil {
		return fmt.Errorf("redirect perf event output: %w", err)
	}
	return nil
}

// Enable starts an event opened disabled.
func (ev *Event) Enable() error {
	if err := unix.IoctlSetInt(ev.fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return fmt.Errorf("enable perf event: %w", err)
	}
	return nil
}

// Disable stops an event.
func (ev *Event) Disable() error {
	if err := unix.IoctlSetInt(ev.fd, unix.PERF_EVENT_IOC_DISABLE, 0); err != nil {
		return fmt.Errorf("disable perf event: %w", err)
	}
	return nil
}

// Close unmaps the ring and closes the event. It is safe to call twice.
func (ev *Event) Close() error {
	var errs []error
	if ev.mem != nil {
		errs = append(errs, unix.Munmap(ev.mem))
		ev.mem, ev.ring = nil, nil
	}
	if ev.fd >= 0 {
		errs = append(errs, unix.Close(ev.fd))
		ev.fd = -1
	}
	return errors.Join(errs...)
}
