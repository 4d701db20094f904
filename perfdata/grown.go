package perfdata

import "bytes"

// The kernel grows some records as it hands them out. For KSYMBOL,
// BPF_EVENT and TEXT_POKE, perf_event_ksymbol_output(),
// perf_event_bpf_output() and perf_event_text_poke_output() (kernel/
// events/core.c, every kernel from 5.1, 5.1 and 5.9 to at least 6.18)
// call perf_event_header__init_id() on the header they share among every
// event that hears the record, which adds the event's sample_id size to
// header.size, and never take it back, as perf_event_mmap_output() and
// perf_event_cgroup_output() do. Each event is served a record as long
// as the ones served before it made it: its own body, its own trailer
// right after the body, then as many stale bytes as the other events'
// trailers. A reader looks for the trailer at the record's end, and perf
// 6.1 refuses the record ("failed to process type: 17 [Bad address]").
// The kernel serves the newest event first, so the oldest event's
// records grow.

// TrueSize returns the size the kernel meant for a KSYMBOL, BPF_EVENT or
// TEXT_POKE record, which may have grown (see TrimGrown): its body, as
// its own fields say, and the trailer of sampleType, the sample_type of
// the event that read it (0 without sample_id_all). A record of another
// type is never grown: TrueSize returns its size. The record must hold
// its header's size, and at least its true size.
func TrueSize(rec []byte, sampleType uint64) (int, error) {
	h, err := ParseHeader(rec)
	if err != nil {
		return 0, err
	}
	if int(h.Size) != len(rec) {
		return 0, errorf(6, "record size %d, have %d bytes", h.Size, len(rec))
	}
	var n int
	switch h.Type {
	case RecordKsymbol:
		n, err = ksymbolBody(rec)
	case RecordBPFEvent:
		n = headerSize + bpfEventSize
	case RecordTextPoke:
		n, err = textPokeBody(rec)
	default:
		return len(rec), nil
	}
	if err != nil {
		return 0, err
	}
	n += SampleIDSize(sampleType)
	if n > len(rec) {
		return 0, errorf(6, "%s record of %d bytes, shorter than its %d-byte body and trailer", h.Type, len(rec), n)
	}
	return n, nil
}

// ksymbolBody is the size of a KSYMBOL's header and body: u64 addr, u32
// len, u16 ksym_type, u16 flags, then the name, NUL-terminated and
// padded with NULs to 8 bytes (perf_event_ksymbol()).
func ksymbolBody(rec []byte) (int, error) {
	const name = headerSize + 16
	if len(rec) < name {
		return 0, errorf(6, "KSYMBOL record of %d bytes too short", len(rec))
	}
	i := bytes.IndexByte(rec[name:], 0)
	if i < 0 {
		return 0, errorf(name, "string not NUL-terminated")
	}
	return name + align8(i+1), nil
}

// textPokeBody is the size of a TEXT_POKE's header and body: u64 addr,
// u16 old_len, u16 new_len, the old and the new bytes, padded to 8 bytes
// (perf_event_text_poke()).
func textPokeBody(rec []byte) (int, error) {
	const lens = headerSize + 8
	if len(rec) < lens+4 {
		return 0, errorf(6, "TEXT_POKE record of %d bytes too short", len(rec))
	}
	n := 4 + int(le.Uint16(rec[lens:])) + int(le.Uint16(rec[lens+2:]))
	return lens + align8(n), nil
}

func align8(n int) int { return (n + 7) &^ 7 }

// TrimGrown cuts a KSYMBOL, BPF_EVENT or TEXT_POKE record that the
// kernel grew down to its true size (TrueSize), so that its trailer,
// written right after its body, is at its end where readers look for
// it. It sets the header's size and returns the record, a prefix of
// rec, and how many bytes it cut: 0 for a record of its true size, or
// of another type. rec is changed in place.
func TrimGrown(rec []byte, sampleType uint64) ([]byte, int, error) {
	n, err := TrueSize(rec, sampleType)
	if err != nil {
		return rec, 0, err
	}
	cut := len(rec) - n
	if cut > 0 {
		rec = rec[:n]
		RecordView(rec).SetSize(n)
	}
	return rec, cut, nil
}
