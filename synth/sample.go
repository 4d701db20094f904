package synth

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// sampleScope is where the sampler of o is opened, with the cgroup
// directory it holds open until the events are.
type sampleScope struct{ bpfmethod.SampleScope }

func (s sampleScope) Close() {
	if s.Cgroup != nil {
		s.Cgroup.Close()
	}
}

func newSampleScope(o *SampleOptions) (sampleScope, error) {
	switch {
	case o.Cgroup != "" && o.Tasks != nil:
		return sampleScope{}, errors.New("sample options: Tasks and Cgroup exclude each other")
	case o.Cgroup == "":
		return sampleScope{bpfmethod.SampleScope{Tasks: o.Tasks}}, nil
	}
	cg, err := procfs.FindCgroupFS()
	if err != nil {
		return sampleScope{}, err
	}
	path := cg.Mount + "/" + strings.Trim(o.Cgroup, "/")
	f, err := os.Open(path)
	if err != nil {
		return sampleScope{}, fmt.Errorf("cgroup %s: %w", o.Cgroup, err)
	}
	return sampleScope{bpfmethod.SampleScope{Cgroup: f}}, nil
}

// samplerAttr is the sampling event: a cpu-clock event at o.Freq on one
// CPU, for the tasks o says. It is opened as it is written into
// perf.data, so the samples decode under it.
func samplerAttr(o *SampleOptions) perfdata.Attr { return samplerAttrOn(o, runtime.GOARCH) }

// regARM64LR is the link register's bit in arm64's sample_regs_user
// (PERF_REG_ARM64_LR, arch/arm64/include/uapi/asm/perf_regs.h).
const regARM64LR = 1 << 30

// samplerAttrOn is samplerAttr on the architecture goarch. On arm64 a
// call chain also samples the user link register, as perf record -g does
// there ("perf tools: Record ARM64 LR register automatically", perf
// 5.19): a leaf function that has not pushed a frame has its caller only
// in LR, and perf report adds that caller to the chain from it.
func samplerAttrOn(o *SampleOptions, goarch string) perfdata.Attr {
	freq := o.Freq
	if freq == 0 {
		freq = DefaultSampleFreq
	}
	st := uint64(perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID |
		perfdata.SampleTime | perfdata.SampleCPU | perfdata.SamplePeriod)
	var regs uint64
	if o.Callchain {
		st |= perfdata.SampleCallchain
		if goarch == "arm64" {
			st |= perfdata.SampleRegsUser
			regs = regARM64LR
		}
	}
	flags := uint64(perfdata.AttrDisabled | perfdata.AttrFreq | perfdata.AttrSampleIDAll |
		perfdata.AttrUseClockID | perfdata.AttrExcludeGuest)
	if o.Inherit {
		flags |= perfdata.AttrInherit
	}
	if o.OnExec {
		flags |= perfdata.AttrEnableOnExec
	}
	return perfdata.Attr{
		Type:           perfdata.TypeSoftware,
		Size:           perfdata.AttrSize,
		Config:         perfdata.CountSWCPUClock,
		SamplePeriod:   freq,
		SampleType:     st,
		SampleRegsUser: regs,
		Flags:          flags,
		ClockID:        unix.CLOCK_MONOTONIC,
	}
}
