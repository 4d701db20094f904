package synth

import (
	"errors"
	"fmt"
	"os"
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
func samplerAttr(o *SampleOptions) perfdata.Attr {
	freq := o.Freq
	if freq == 0 {
		freq = DefaultSampleFreq
	}
	st := uint64(perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID |
		perfdata.SampleTime | perfdata.SampleCPU | perfdata.SamplePeriod)
	if o.Callchain {
		st |= perfdata.SampleCallchain
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
		Type:         perfdata.TypeSoftware,
		Size:         perfdata.AttrSize,
		Config:       perfdata.CountSWCPUClock,
		SamplePeriod: freq,
		SampleType:   st,
		Flags:        flags,
		ClockID:      unix.CLOCK_MONOTONIC,
	}
}
