package synth

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// sampleScope is where the sampler is opened, with the cgroup directory
// it holds open until the events are, and whether the events inherit.
type sampleScope struct {
	bpfmethod.SampleScope
	inherit bool
}

func (s sampleScope) Close() {
	if s.Cgroup != nil {
		s.Cgroup.Close()
	}
}

// newSampleScope opens the sampler where perf record would for target t,
// whose processes are pids (see SampleOptions).
func newSampleScope(o *SampleOptions, t Target, pids []int) (sampleScope, error) {
	switch {
	case t.Cgroup != "":
		return cgroupScope(t.Cgroup)
	case len(t.Tids) > 0:
		return sampleScope{SampleScope: bpfmethod.SampleScope{Tasks: t.Tids}}, nil // -t does not inherit
	case len(pids) > 0 && o.OnExec:
		// A workload before its exec: the thread that will exec.
		return sampleScope{SampleScope: bpfmethod.SampleScope{Tasks: pids}, inherit: true}, nil
	case len(pids) > 0:
		sc, err := threadScope(pids)
		return sampleScope{SampleScope: sc, inherit: true}, err
	}
	return sampleScope{}, nil
}

// newLiveScope narrows the side-band to target t, whose processes are
// pids, as perf record opens its side-band for it: per thread of the
// processes, inherited, for -p, -t and a command; per CPU for the
// cgroup of -G. The whole host (-a) and a user (-u) keep the side-band
// of every task, filtered as it is read: a user's processes include
// those that other processes start for it later (a login, a cron job),
// which no event inherited from its present ones would see. The scope
// holds the cgroup directory open until the events are.
func newLiveScope(t Target, pids []int) (*bpfmethod.Scope, func(), error) {
	switch {
	case t.Cgroup != "":
		sc, err := cgroupScope(t.Cgroup)
		if err != nil {
			return nil, nil, err
		}
		return &sc.SampleScope, sc.Close, nil
	case len(t.Pids) > 0 || len(t.Tids) > 0:
		sc, err := threadScope(pids)
		return &sc, func() {}, err
	}
	return nil, func() {}, nil
}

// threadScope is the scope of the threads of processes pids, listed
// again until no new thread appears (bpfmethod.Scope.Relist).
func threadScope(pids []int) (bpfmethod.Scope, error) {
	tids, err := threadsOf(pids)
	relist := func() ([]int, error) {
		tids, err := threadsOf(pids)
		if errors.Is(err, bpfmethod.ErrNoTask) {
			return nil, nil // exited since: no new thread
		}
		return tids, err
	}
	return bpfmethod.Scope{Tasks: tids, Relist: relist}, err
}

// threadsOf returns the threads of the processes pids; a process that
// has exited meanwhile has none, and none at all is bpfmethod.ErrNoTask.
func threadsOf(pids []int) ([]int, error) {
	var tids []int
	for _, pid := range pids {
		threads, err := procfs.ReadComms(pid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("threads of process %d: %w", pid, err)
		}
		tids = append(tids, slices.Sorted(maps.Keys(threads))...)
	}
	if tids == nil {
		return nil, fmt.Errorf("threads of the target: %w", bpfmethod.ErrNoTask)
	}
	return tids, nil
}

// cgroupScope opens the directory of cgroup path, for a cgroup event.
func cgroupScope(path string) (sampleScope, error) {
	cg, err := procfs.FindCgroupFS()
	if err != nil {
		return sampleScope{}, err
	}
	f, err := os.Open(cg.Mount + "/" + strings.Trim(path, "/"))
	if err != nil {
		return sampleScope{}, fmt.Errorf("cgroup %s: %w", path, err)
	}
	return sampleScope{SampleScope: bpfmethod.SampleScope{Cgroup: f}}, nil
}

// samplerAttr is the sampling event: a cpu-clock event at o.Freq on one
// CPU, inheriting or not. It is opened as it is written into perf.data,
// so the samples decode under it.
func samplerAttr(o *SampleOptions, inherit bool) perfdata.Attr {
	return samplerAttrOn(o, inherit, runtime.GOARCH)
}

// regARM64LR is the link register's bit in arm64's sample_regs_user
// (PERF_REG_ARM64_LR, arch/arm64/include/uapi/asm/perf_regs.h).
const regARM64LR = 1 << 30

// samplerAttrOn is samplerAttr on the architecture goarch. On arm64 a
// call chain also samples the user link register, as perf record -g does
// there ("perf tools: Record ARM64 LR register automatically", perf
// 5.19): a leaf function that has not pushed a frame has its caller only
// in LR, and perf report adds that caller to the chain from it.
func samplerAttrOn(o *SampleOptions, inherit bool, goarch string) perfdata.Attr {
	name, mods, hasMods := splitEvent(o.Event)
	ev := sampleEvents[name]
	m, _ := parseModifiers(mods, hasMods) // check refused what it cannot read
	freq := o.Freq
	if freq == 0 {
		freq = DefaultSampleFreq
	}
	st := uint64(perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID |
		perfdata.SampleTime | perfdata.SampleCPU | perfdata.SamplePeriod)
	var regs, readFormat uint64
	if m.sampleRead {
		// As perf's evsel__config for :S: the count, with its id.
		st |= perfdata.SampleRead
		readFormat = perfdata.ReadID
	}
	if o.Callchain {
		st |= perfdata.SampleCallchain
		if goarch == "arm64" {
			st |= perfdata.SampleRegsUser
			regs = regARM64LR
		}
	}
	flags := perfdata.AttrDisabled | perfdata.AttrFreq | perfdata.AttrSampleIDAll |
		perfdata.AttrUseClockID | o.modifierFlags(m)
	if o.Period > 0 {
		flags &^= perfdata.AttrFreq
		freq = o.Period
	}
	if inherit {
		flags |= perfdata.AttrInherit
	}
	if o.OnExec {
		flags |= perfdata.AttrEnableOnExec
	}
	return perfdata.Attr{
		Type:           ev.typ,
		Size:           perfdata.AttrSize,
		Config:         ev.config,
		SamplePeriod:   freq,
		SampleType:     st,
		ReadFormat:     readFormat,
		SampleRegsUser: regs,
		Flags:          flags,
		ClockID:        unix.CLOCK_MONOTONIC,
	}
}

// The events SampleOptions.Event names, as perf list does.
const (
	EventCPUClock     = "cpu-clock"
	EventTaskClock    = "task-clock"
	EventCycles       = "cycles"
	EventInstructions = "instructions"
)

// sampleEvent is an event's type and config in perf_event_attr.
type sampleEvent struct {
	typ    uint32
	config uint64
}

var sampleEvents = map[string]sampleEvent{
	"":                {perfdata.TypeSoftware, perfdata.CountSWCPUClock},
	EventCPUClock:     {perfdata.TypeSoftware, perfdata.CountSWCPUClock},
	EventTaskClock:    {perfdata.TypeSoftware, perfdata.CountSWTaskClock},
	EventCycles:       {perfdata.TypeHardware, perfdata.CountHWCPUCycles},
	EventInstructions: {perfdata.TypeHardware, perfdata.CountHWInstructions},
}

// ErrNoEvent says that the kernel has no such event on this host: a
// hardware event without a PMU that counts it (a VM without a virtual
// PMU).
var ErrNoEvent = errors.New("the CPU has no PMU counter for it (a VM without a virtual PMU?)")

// check checks the event options.
func (o *SampleOptions) check() error {
	if o.Event != "" {
		if err := CheckEvent(o.Event); err != nil {
			return err
		}
	}
	if o.ExcludeKernel && o.ExcludeUser {
		return errors.New("an event that excludes both the kernel and user space samples nothing")
	}
	return nil
}

// modifierFlags are the attr flags of the event's modifiers m, with
// ExcludeKernel's and ExcludeUser's.
func (o *SampleOptions) modifierFlags(m eventModifiers) uint64 {
	flags := m.flags
	if o.ExcludeKernel {
		flags |= perfdata.AttrExcludeKernel | perfdata.AttrExcludeHV
	}
	if o.ExcludeUser {
		flags |= perfdata.AttrExcludeUser
	}
	return flags
}

// hardware reports whether the event is counted by the PMU.
func (o *SampleOptions) hardware() bool {
	name, _, _ := splitEvent(o.Event)
	return sampleEvents[name].typ == perfdata.TypeHardware
}

// eventName is the event's name in perf.data, as perf writes it: as
// given, with its modifiers (cpu-clock, cycles:pp); ExcludeKernel and
// ExcludeUser add :u and :k. An event that replaces another
// (Fallback) is named from its attr, as perf names it then
// (cpu-clock:uH).
func (o *SampleOptions) eventName() string {
	event := cmp.Or(o.Event, EventCPUClock)
	name, mods, hasMods := splitEvent(event)
	if o.Fallback {
		m, _ := parseModifiers(mods, hasMods)
		return modifierName(name, o.modifierFlags(m))
	}
	switch {
	case hasMods:
	case o.ExcludeKernel:
		event += ":u"
	case o.ExcludeUser:
		event += ":k"
	}
	return event
}
