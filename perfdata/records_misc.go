package perfdata

// Throttle mirrors PERF_RECORD_THROTTLE and PERF_RECORD_UNTHROTTLE: u64
// time, id, stream_id. Unthrottle says which of the two.
type Throttle struct {
	Unthrottle         bool
	Time, ID, StreamID uint64
}

// Append appends the record; see Mmap.Append.
func (t *Throttle) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	typ := RecordThrottle
	if t.Unthrottle {
		typ = RecordUnthrottle
	}
	b, at := startRecord(b, typ, 0)
	b = appendU64s(b, []uint64{t.Time, t.ID, t.StreamID})
	return finishRecord(b, at, sampleType, sid)
}

// ParseThrottle decodes a PERF_RECORD_THROTTLE or UNTHROTTLE; see
// ParseMmap for sampleType.
func ParseThrottle(rec []byte, sampleType uint64) (Throttle, SampleID, error) {
	typ := RecordThrottle
	if h, err := ParseHeader(rec); err == nil && h.Type == RecordUnthrottle {
		typ = RecordUnthrottle
	}
	p, _, err := body(rec, typ, sampleType, 24)
	if err != nil {
		return Throttle{}, SampleID{}, err
	}
	t := Throttle{Unthrottle: typ == RecordUnthrottle, Time: le.Uint64(p), ID: le.Uint64(p[8:]), StreamID: le.Uint64(p[16:])}
	sid, err := ParseSampleID(rec, sampleType)
	return t, sid, err
}

// LostSamples mirrors PERF_RECORD_LOST_SAMPLES: u64 lost.
type LostSamples struct{ Lost uint64 }

// Append appends the record; see Mmap.Append.
func (l *LostSamples) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, RecordLostSamples, 0)
	b = le.AppendUint64(b, l.Lost)
	return finishRecord(b, at, sampleType, sid)
}

// ParseLostSamples decodes a PERF_RECORD_LOST_SAMPLES; see ParseMmap for
// sampleType.
func ParseLostSamples(rec []byte, sampleType uint64) (LostSamples, SampleID, error) {
	p, _, err := body(rec, RecordLostSamples, sampleType, 8)
	if err != nil {
		return LostSamples{}, SampleID{}, err
	}
	sid, err := ParseSampleID(rec, sampleType)
	return LostSamples{Lost: le.Uint64(p)}, sid, err
}

// MiscSwitchOut marks a SWITCH record of a task leaving the CPU.
const MiscSwitchOut = 1 << 13

// Switch mirrors PERF_RECORD_SWITCH (no body) and, with CPUWide,
// PERF_RECORD_SWITCH_CPU_WIDE: u32 next_prev_pid, next_prev_tid.
type Switch struct {
	Misc                     uint16 // MiscSwitchOut
	CPUWide                  bool
	NextPrevPid, NextPrevTid uint32
}

// Append appends the record; see Mmap.Append.
func (s *Switch) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	typ := RecordSwitch
	if s.CPUWide {
		typ = RecordSwitchCPUWide
	}
	b, at := startRecord(b, typ, s.Misc)
	if s.CPUWide {
		b = le.AppendUint32(b, s.NextPrevPid)
		b = le.AppendUint32(b, s.NextPrevTid)
	}
	return finishRecord(b, at, sampleType, sid)
}

// ParseSwitch decodes a PERF_RECORD_SWITCH or SWITCH_CPU_WIDE; see
// ParseMmap for sampleType.
func ParseSwitch(rec []byte, sampleType uint64) (Switch, SampleID, error) {
	h, err := ParseHeader(rec)
	if err != nil {
		return Switch{}, SampleID{}, err
	}
	s := Switch{Misc: h.Misc, CPUWide: h.Type == RecordSwitchCPUWide}
	typ, min := RecordSwitch, 0
	if s.CPUWide {
		typ, min = RecordSwitchCPUWide, 8
	}
	p, _, err := body(rec, typ, sampleType, min)
	if err != nil {
		return Switch{}, SampleID{}, err
	}
	if s.CPUWide {
		s.NextPrevPid, s.NextPrevTid = le.Uint32(p), le.Uint32(p[4:])
	}
	sid, err := ParseSampleID(rec, sampleType)
	return s, sid, err
}
