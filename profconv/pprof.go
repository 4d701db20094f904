package profconv

import (
	"encoding/hex"
	"fmt"

	"github.com/google/pprof/profile"
	"github.com/synth-dev/synth/synth"
)

// sampleTypes are the profile's value types: per event its count of
// samples and its summed period. With one event they are
// samples/count and EVENT/UNIT, as Go's own CPU profiles have them;
// with several, EVENT_samples/count and EVENT/UNIT for each, in the
// order of the file's attrs, a sample of one event zero in the others'.
// Events without samples (the side-band's dummy event) have none.
func (c *Converter) sampleTypes() (types [][2]string, events []int) {
	for i := range c.events {
		if c.sampled[i] {
			events = append(events, i)
		}
	}
	for _, i := range events {
		e := c.events[i]
		count := "samples"
		if len(events) > 1 {
			count = e.name + "_samples"
		}
		types = append(types, [2]string{count, "count"}, [2]string{e.name, e.unit})
	}
	return types, events
}

// values are a sample's values of the events sampled, in their order.
func values(a *aggSample, events []int) []int64 {
	v := make([]int64, 0, 2*len(events))
	for _, i := range events {
		v = append(v, a.values[2*i], a.values[2*i+1])
	}
	return v
}

// Profile builds the pprof profile of the samples taken in so far.
// Each location keeps its address and its mapping (file, range,
// offset, build ID), so that a backend can symbolize again; a
// mapping's frames are named when its file was at hand and provably
// the one mapped (see Stats).
func (c *Converter) Profile() (*profile.Profile, error) {
	c.finish()
	p := &profile.Profile{DurationNanos: int64(c.last - c.first)}
	types, events := c.sampleTypes()
	for _, t := range types {
		p.SampleType = append(p.SampleType, &profile.ValueType{Type: t[0], Unit: t[1]})
	}
	if len(events) > 0 {
		e := c.events[events[0]]
		p.DefaultSampleType = e.name
		p.PeriodType = &profile.ValueType{Type: e.name, Unit: e.unit}
		if e.attr.Flags&attrFreq == 0 {
			p.Period = int64(e.attr.SamplePeriod)
		}
	}
	maps := make([]*profile.Mapping, len(c.maps))
	for i, m := range c.maps {
		pm := &profile.Mapping{ID: uint64(i + 1), Start: m.start, Limit: m.end, Offset: m.pgoff, File: m.path,
			BuildID: hex.EncodeToString(m.buildID), HasFunctions: m.syms != nil}
		if m.kind == synth.LocationKernel {
			pm.Offset = 0
		}
		maps[i], p.Mapping = pm, append(p.Mapping, pm)
	}
	funcs := map[string]*profile.Function{}
	locs := make([]*profile.Location, len(c.locs))
	for i, l := range c.locs {
		pl := &profile.Location{ID: uint64(i + 1), Address: l.addr}
		if l.mapping >= 0 {
			m := c.maps[l.mapping]
			pl.Mapping = maps[l.mapping]
			if name := m.name(l.addr); name != "" {
				f, ok := funcs[name+"\x00"+m.path]
				if !ok {
					f = &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name, Filename: m.path}
					funcs[name+"\x00"+m.path] = f
					p.Function = append(p.Function, f)
				}
				pl.Line = []profile.Line{{Function: f}}
			}
		}
		locs[i], p.Location = pl, append(p.Location, pl)
	}
	for _, a := range c.order {
		s := &profile.Sample{Value: values(a, events),
			NumLabel: map[string][]int64{"pid": {int64(a.pid)}, "tid": {int64(a.tid)}}}
		if a.comm != "" {
			s.Label = map[string][]string{"comm": {a.comm}}
		}
		for _, l := range a.locs {
			s.Location = append(s.Location, locs[l])
		}
		p.Sample = append(p.Sample, s)
	}
	if err := p.CheckValid(); err != nil {
		return nil, fmt.Errorf("pprof profile: %w", err)
	}
	return p, nil
}

// attrFreq is perf_event_attr's freq bit: sample_period is a frequency.
const attrFreq = 1 << 10
