package synth

import "github.com/synth-dev/synth/perfdata"

// Sample decodes a KindSample record under the attr of the sampling
// event that recorded it, the last of Session.Attrs: IP, pid and tid,
// time, CPU, period, and the call chain with SampleOptions.Callchain.
// ok is false for any other record, for a record not read from a
// Session, and for a malformed sample. The sample is a copy: it stays
// valid after the next Read, as Raw does not.
func (r *Record) Sample() (s perfdata.Sample, ok bool) {
	if r.Kind != KindSample || r.sampler == nil {
		return perfdata.Sample{}, false
	}
	s, err := perfdata.ParseSample(r.Raw, r.sampler)
	return s, err == nil
}
