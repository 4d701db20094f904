package perfdata

// SampleID is the sample_id_all trailer of a non-sample record
// (struct sample_id in include/uapi/linux/perf_event.h). Which fields are
// present depends on the attr's sample_type.
type SampleID struct {
	Pid, Tid   uint32 // SampleTID
	Time       uint64 // SampleTime
	ID         uint64 // SampleID
	StreamID   uint64 // SampleStreamID
	CPU        uint32 // SampleCPU (followed by a reserved u32)
	Identifier uint64 // SampleIdentifier
}

// SampleIDSize is the size of the trailer for sampleType.
func SampleIDSize(sampleType uint64) int {
	n := 0
	for _, bit := range []uint64{SampleTID, SampleTime, SampleTypeID, SampleStreamID, SampleCPU, SampleIdentifier} {
		if sampleType&bit != 0 {
			n += 8
		}
	}
	return n
}

// AppendSampleID appends the trailer for sampleType.
func AppendSampleID(b []byte, sampleType uint64, s *SampleID) []byte {
	if sampleType&SampleTID != 0 {
		b = le.AppendUint32(b, s.Pid)
		b = le.AppendUint32(b, s.Tid)
	}
	if sampleType&SampleTime != 0 {
		b = le.AppendUint64(b, s.Time)
	}
	if sampleType&SampleTypeID != 0 {
		b = le.AppendUint64(b, s.ID)
	}
	if sampleType&SampleStreamID != 0 {
		b = le.AppendUint64(b, s.StreamID)
	}
	if sampleType&SampleCPU != 0 {
		b = le.AppendUint32(b, s.CPU)
		b = le.AppendUint32(b, 0)
	}
	if sampleType&SampleIdentifier != 0 {
		b = le.AppendUint64(b, s.Identifier)
	}
	return b
}

// ParseSampleID decodes the trailer at the end of rec, a whole record.
func ParseSampleID(rec []byte, sampleType uint64) (SampleID, error) {
	var s SampleID
	n := SampleIDSize(sampleType)
	if len(rec) < headerSize+n {
		return s, errorf(0, "record of %d bytes too short for a %d-byte sample_id", len(rec), n)
	}
	p := rec[len(rec)-n:]
	next := func() uint64 { v := le.Uint64(p); p = p[8:]; return v }
	if sampleType&SampleTID != 0 {
		v := next()
		s.Pid, s.Tid = uint32(v), uint32(v>>32)
	}
	if sampleType&SampleTime != 0 {
		s.Time = next()
	}
	if sampleType&SampleTypeID != 0 {
		s.ID = next()
	}
	if sampleType&SampleStreamID != 0 {
		s.StreamID = next()
	}
	if sampleType&SampleCPU != 0 {
		s.CPU = uint32(next())
	}
	if sampleType&SampleIdentifier != 0 {
		s.Identifier = next()
	}
	return s, nil
}
