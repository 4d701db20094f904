package synth

import (
	"slices"
	"testing"

	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/perfdata"
)

// A child's records drained before its parent's FORK (another CPU's
// ring) still belong to a session that follows the parent.
func TestSessionFollowsForksInTimeOrder(t *testing.T) {
	s := &Session{filter: liveFilter{tracked: map[uint32]struct{}{100: {}}}}
	child := perfdata.Mmap2{Pid: 200, Tid: 200, Addr: 0x1000, Len: 0x1000, Filename: "/bin/child"}
	fork := perfdata.Fork{Pid: 200, Ppid: 100, Tid: 200, Ptid: 100, Time: 10}
	other := perfdata.Mmap2{Pid: 300, Tid: 300, Addr: 0x1000, Len: 0x1000, Filename: "/bin/other"}
	s.live.push(child.Append(nil, 0, nil), liveRec{kind: KindLive, pid: 200, time: 20})
	s.live.push(other.Append(nil, 0, nil), liveRec{kind: KindLive, pid: 300, time: 15})
	s.live.push(fork.Append(nil, 0, nil), liveRec{kind: KindLive, pid: 100, time: 10})
	s.live.sort()
	var got []perfdata.RecordType
	recs := make([]Record, 4)
	n := s.popLive(recs, ^uint64(0))
	for _, rec := range recs[:n] {
		got = append(got, perfdata.RecordView(rec.Raw).Type())
	}
	if want := []perfdata.RecordType{perfdata.RecordFork, perfdata.RecordMmap2}; !slices.Equal(got, want) {
		t.Errorf("records %v, want %v (FORK, then the child's MMAP2)", got, want)
	}
	if s.stats.Filtered != 1 || s.stats.Live != 2 {
		t.Errorf("stats %+v", s.stats)
	}
}

// With call chains the sampler also samples the user link register on
// arm64, as perf record -g does there, and so does the side-band, which
// shares its sample_type (the kernel refuses PERF_SAMPLE_REGS_USER
// without a mask); on x86-64 neither does.
func TestSamplerAttrArch(t *testing.T) {
	for _, tc := range []struct {
		goarch    string
		callchain bool
		regs      uint64
	}{{"arm64", true, regARM64LR}, {"arm64", false, 0}, {"amd64", true, 0}} {
		a := samplerAttrOn(&SampleOptions{Callchain: tc.callchain}, false, tc.goarch)
		if got := a.SampleType&perfdata.SampleRegsUser != 0; got != (tc.regs != 0) || a.SampleRegsUser != tc.regs {
			t.Errorf("%s, callchain %v: REGS_USER %v, sample_regs_user %#x; want mask %#x", tc.goarch, tc.callchain, got, a.SampleRegsUser, tc.regs)
		}
		rc := bpfmethod.RingConfig{SampleType: a.SampleType, SampleRegsUser: a.SampleRegsUser}
		if side := rc.LiveAttr(); side.SampleType != a.SampleType || side.SampleRegsUser != a.SampleRegsUser {
			t.Errorf("%s: the side-band's sample_type %#x, regs %#x; the sampler's %#x, %#x",
				tc.goarch, side.SampleType, side.SampleRegsUser, a.SampleType, a.SampleRegsUser)
		}
	}
}
