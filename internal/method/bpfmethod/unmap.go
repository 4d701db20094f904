package bpfmethod

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/perfdata"
)

// RecordUnmap is the type of the synth-private record of a range a
// process unmapped or moved between dumps (SYNTH_RECORD_UNMAP,
// struct synth_unmap in bpf/synth.h): perf_event_header, u32 pid and tid
// (the reader's pid namespace's), u64 start, end, to and to_end. It has
// no sample_id trailer and is never written to perf.data: no perf.data
// reader knows it, and perfdata.Writer refuses its type (in
// perfdata's private range, RecordType.Private).
const RecordUnmap = perfdata.RecordType(synthbpf.SynthSynthRecordTypeSYNTH_RECORD_UNMAP)

// UnmapSize is the size of a RecordUnmap record, its synth_hdr left out.
const UnmapSize = int(unsafe.Sizeof(synthbpf.SynthSynthUnmap{}) - unsafe.Sizeof(synthbpf.SynthSynthHdr{}))

// Offsets in a RecordUnmap record.
const (
	unmapTid   = int(unsafe.Offsetof(synthbpf.SynthSynthUnmap{}.Tid)) - hdrSize
	unmapWhat  = int(unsafe.Offsetof(synthbpf.SynthSynthUnmap{}.What)) - hdrSize
	unmapStart = int(unsafe.Offsetof(synthbpf.SynthSynthUnmap{}.Start)) - hdrSize
	unmapEnd   = int(unsafe.Offsetof(synthbpf.SynthSynthUnmap{}.End)) - hdrSize
	unmapTo    = int(unsafe.Offsetof(synthbpf.SynthSynthUnmap{}.To)) - hdrSize
	unmapToEnd = int(unsafe.Offsetof(synthbpf.SynthSynthUnmap{}.ToEnd)) - hdrSize
)

// Unmap is what a RecordUnmap says: process Pid's range [Start, End)
// went; after an mremap(2), the mapping that held Start spans [To,
// ToEnd) (To == ToEnd: nothing does). With NoExec the range did not go
// but is no longer executable (mprotect(2), or a MAP_FIXED mmap(2)
// without PROT_EXEC over it).
type Unmap struct {
	Pid, Tid   uint32
	Start, End uint64
	To, ToEnd  uint64
	NoExec     bool
}

// ParseUnmap reads a RecordUnmap record.
func ParseUnmap(rec []byte) (Unmap, error) {
	v := perfdata.RecordView(rec)
	if len(rec) < UnmapSize || v.Type() != RecordUnmap || v.Size() != UnmapSize {
		return Unmap{}, fmt.Errorf("unmap record of %d bytes, type %#x", len(rec), v.Type())
	}
	return Unmap{Pid: v.Pid(), Tid: hostOrder.Uint32(rec[unmapTid:]),
		Start: hostOrder.Uint64(rec[unmapStart:]), End: hostOrder.Uint64(rec[unmapEnd:]),
		To: hostOrder.Uint64(rec[unmapTo:]), ToEnd: hostOrder.Uint64(rec[unmapToEnd:]),
		NoExec: hostOrder.Uint32(rec[unmapWhat:]) == uint32(synthbpf.SynthSynthUnmapWhatSYNTH_UNMAP_NOEXEC)}, nil
}

// unmapHooks are the syscalls' tracepoints the unmap programs attach to
// (bpf/synth.bpf.c), in attach order: an exit with no enter noted is
// ignored, so the enters go first.
var unmapHooks = []struct{ prog, event string }{
	{synthbpf.SynthProgEnterMunmap, "sys_enter_munmap"},
	{synthbpf.SynthProgEnterMremap, "sys_enter_mremap"},
	{synthbpf.SynthProgEnterMprotect, "sys_enter_mprotect"},
	{synthbpf.SynthProgEnterMmap, "sys_enter_mmap"},
	{synthbpf.SynthProgExitMunmap, "sys_exit_munmap"},
	{synthbpf.SynthProgExitMremap, "sys_exit_mremap"},
	{synthbpf.SynthProgExitMprotect, "sys_exit_mprotect"},
	{synthbpf.SynthProgExitMmap, "sys_exit_mmap"},
}

// unmapLinks attach the unmap programs to the syscalls' tracepoints
// (unmapHooks). They own the attachments; Close detaches the programs.
type unmapLinks struct {
	links []link.Link
}

// WatchUnmaps attaches the unmap programs: from then on the live records
// include a RecordUnmap for each range a process unmaps with munmap(2)
// or mremap(2), numbered in this process's pid namespace, which a
// syscall program notes first. It fails where the kernel has no syscall
// programs (5.14) or syscall tracepoints (CONFIG_FTRACE_SYSCALLS), or
// tracefs cannot be mounted; calling it again does nothing. The records
// come through rings of their own, one per CPU as large as the others
// (UnmapFDs), so that no number of unmaps costs a dump its records.
func (b *BPF) WatchUnmaps() error {
	if b.unmaps != nil {
		return nil
	}
	u, err := attachUnmaps(b.lo.objs, b.rings)
	if err != nil {
		return fmt.Errorf("watch unmaps: %w", err)
	}
	b.unmaps = u
	return nil
}

// UnmapFDs returns the descriptors of the unmap programs' rings, to
// poll: none before WatchUnmaps.
func (b *BPF) UnmapFDs() []int { return fdsOf(b.rings.unmaps) }

// attachUnmaps attaches the unmap programs of objs, having noted this
// process's pid namespace for them, and their rings, opened in r
// between their load, which creates unmap_events, and their attachment.
func attachUnmaps(objs *objects, r *rings) (*unmapLinks, error) {
	if err := mountTracefs(); err != nil {
		return nil, err
	}
	note, err := objs.program(synthbpf.SynthProgNoteReader)
	if err == nil {
		_, err = note.Run(&ebpf.RunOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("note this process's pid namespace: %w", err)
	}
	progs := make([]*ebpf.Program, len(unmapHooks))
	for i, h := range unmapHooks {
		if progs[i], err = objs.program(h.prog); err != nil {
			return nil, fmt.Errorf("load %s for syscalls:%s: %w", h.prog, h.event, err)
		}
	}
	if r.unmaps == nil {
		if err := r.openUnmaps(objs.UnmapEvents); err != nil {
			return nil, err
		}
	}
	u := &unmapLinks{}
	for i, h := range unmapHooks {
		l, err := link.Tracepoint("syscalls", h.event, progs[i], nil)
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("attach to syscalls:%s: %w", h.event, err)
		}
		u.links = append(u.links, l)
	}
	return u, nil
}

// Close detaches the unmap programs.
func (u *unmapLinks) Close() error {
	if u == nil {
		return nil
	}
	var errs []error
	for _, l := range u.links {
		errs = append(errs, l.Close())
	}
	u.links = nil
	return errors.Join(errs...)
}

// tracefsDir is where tracefs belongs (Documentation/trace/ftrace.rst).
const tracefsDir = "/sys/kernel/tracing"

// mountTracefs mounts tracefs where neither it nor debugfs is, as perf
// does (tools/lib/api/fs/fs.c): a tracepoint's id, which attaching needs,
// is read from there. A host that mounts neither is common (containers,
// minimal VMs); root may mount it, and the mount stays, harmless.
func mountTracefs() error {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(mounts)) {
		if f := strings.Fields(line); len(f) > 2 && (f[2] == "tracefs" || f[2] == "debugfs") {
			return nil
		}
	}
	if err := unix.Mount("tracefs", tracefsDir, "tracefs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("tracefs is not mounted, and mounting it on %s: %w", tracefsDir, err)
	}
	return nil
}

// UnmapMisses returns how many unmap calls the stream has not reported
// and never will: the kernel skipped an unmap program (bpf_prog_info's
// recursion_misses: trace_call_bpf runs no tracing program on a CPU
// where another one, even another tool's, or a map operation from
// userspace is under way), or a program could not write its note or
// its record (unmaps_missed in bpf/unmap.bpf.h), a full unmap ring
// among the reasons (UnmapsLost). The next dump corrects what they
// missed.
func (b *BPF) UnmapMisses() (uint64, error) {
	var n uint64
	if err := b.lo.objs.UnmapsMissed.Get(&n); err != nil {
		return 0, fmt.Errorf("unmaps missed: %w", err)
	}
	for _, h := range unmapHooks {
		prog, err := b.lo.objs.program(h.prog)
		if err != nil {
			return 0, err
		}
		st, err := prog.Stats()
		if err != nil {
			return 0, fmt.Errorf("unmap program %s: %w", h.prog, err)
		}
		n += st.RecursionMisses
	}
	return n, nil
}

// UnmapsLost returns how many unmap records the kernel could not write
// because an unmap ring was full, as its PERF_RECORD_LOST records in
// them say, up to the last drain. Each is an unmap missed too (the
// program counts the write that failed): UnmapMisses counts them.
func (b *BPF) UnmapsLost() uint64 { return b.rings.unmapsLost.Load() }
