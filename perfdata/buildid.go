package perfdata

// BuildIDEvent mirrors struct perf_record_header_build_id
// (tools/lib/perf/include/perf/event.h): header, s32 pid, build_id[24]
// (20 bytes of id, u8 size, 3 reserved), then the file name padded to 64.
// It is both an entry of the HEADER_BUILD_ID feature section (file mode)
// and a PERF_RECORD_HEADER_BUILD_ID record (pipe mode).
type BuildIDEvent struct {
	Misc     uint16 // MiscKernel or MiscUser; MiscBuildIDSize is added
	Pid      int32  // -1: the host (perf's HOST_KERNEL_ID)
	BuildID  []byte // at most BuildIDMax bytes
	Filename string
}

// Append appends the event as a record of type RecordHeaderBuildID.
func (e *BuildIDEvent) Append(b []byte) []byte {
	b, at := startRecord(b, RecordHeaderBuildID, e.Misc|MiscBuildIDSize)
	b = le.AppendUint32(b, uint32(e.Pid))
	id := e.BuildID[:min(len(e.BuildID), BuildIDMax)]
	b = append(b, id...)
	b = append(b, make([]byte, BuildIDMax-len(id))...)
	b = append(b, byte(len(id)), 0, 0, 0)
	n := (len(e.Filename) + 1 + nameAlign - 1) / nameAlign * nameAlign
	b = append(b, e.Filename...)
	b = append(b, make([]byte, n-len(e.Filename))...)
	return finishRecord(b, at, 0, nil)
}

// ParseBuildIDEvent decodes one build-id event.
func ParseBuildIDEvent(rec []byte) (BuildIDEvent, error) {
	p, h, err := body(rec, RecordHeaderBuildID, 0, 4+24+1)
	if err != nil {
		// The feature section's entries carry type 0 in some perf
		// versions: accept them too.
		if p, h, err = body(rec, 0, 0, 4+24+1); err != nil {
			return BuildIDEvent{}, err
		}
	}
	e := BuildIDEvent{Misc: h.Misc &^ MiscBuildIDSize, Pid: int32(le.Uint32(p))}
	n := BuildIDMax
	if h.Misc&MiscBuildIDSize != 0 {
		n = int(p[4+BuildIDMax])
		if n > BuildIDMax {
			return e, errorf(headerSize+4+BuildIDMax, "build id size %d", n)
		}
	}
	e.BuildID = append([]byte{}, p[4:4+n]...)
	e.Filename, err = cString(p[28:], headerSize+28)
	return e, err
}

// BuildIDFeature is the HEADER_BUILD_ID section: the events, back to back.
func BuildIDFeature(evs []BuildIDEvent) Feature {
	var b []byte
	for i := range evs {
		b = evs[i].Append(b)
	}
	return Feature{ID: FeatBuildID, Data: b}
}
