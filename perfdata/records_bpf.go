package perfdata

// KSYMBOL types (enum perf_record_ksymbol_type,
// include/uapi/linux/perf_event.h).
const (
	KsymbolTypeUnknown = 0
	KsymbolTypeBPF     = 1
	KsymbolTypeOOL     = 2 // out-of-line code: trampolines, static calls
)

// KsymbolFlagUnregister marks a KSYMBOL that removes its symbol
// (PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER).
const KsymbolFlagUnregister = 1 << 0

// BPF_EVENT types (enum perf_bpf_event_type).
const (
	BPFEventUnknown    = 0
	BPFEventProgLoad   = 1
	BPFEventProgUnload = 2
)

// BPFTagSize is the size of a BPF program's tag (BPF_TAG_SIZE,
// include/uapi/linux/bpf.h).
const BPFTagSize = 8

// Ksymbol mirrors PERF_RECORD_KSYMBOL: u64 addr; u32 len; u16
// ksym_type, flags; char name[]. It names kernel code that no map
// covers: a JITed BPF program, or a trampoline or dispatcher of BPF.
type Ksymbol struct {
	Addr  uint64
	Len   uint32
	Type  uint16 // KsymbolType*
	Flags uint16 // KsymbolFlag*
	Name  string
}

// Append appends the record; see Mmap.Append.
func (k *Ksymbol) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, RecordKsymbol, 0)
	b = le.AppendUint64(b, k.Addr)
	b = le.AppendUint32(b, k.Len)
	b = le.AppendUint16(b, k.Type)
	b = le.AppendUint16(b, k.Flags)
	b = appendString(b, k.Name)
	return finishRecord(b, at, sampleType, sid)
}

// ParseKsymbol decodes a PERF_RECORD_KSYMBOL; see ParseMmap for
// sampleType.
func ParseKsymbol(rec []byte, sampleType uint64) (Ksymbol, SampleID, error) {
	p, _, err := body(rec, RecordKsymbol, sampleType, 16+1)
	if err != nil {
		return Ksymbol{}, SampleID{}, err
	}
	k := Ksymbol{Addr: le.Uint64(p), Len: le.Uint32(p[8:]),
		Type: le.Uint16(p[12:]), Flags: le.Uint16(p[14:])}
	if k.Name, err = cString(p[16:], headerSize+16); err != nil {
		return k, SampleID{}, err
	}
	sid, err := ParseSampleID(rec, sampleType)
	return k, sid, err
}

// BPFEvent mirrors PERF_RECORD_BPF_EVENT: u16 type, flags; u32 id; u8
// tag[BPF_TAG_SIZE]. A PROG_LOAD event follows the KSYMBOL records of
// the program's functions; its id is the one bpftool lists.
type BPFEvent struct {
	Type  uint16 // BPFEvent*
	Flags uint16
	ID    uint32
	Tag   [BPFTagSize]byte
}

// bpfEventSize is the body of a BPF_EVENT record.
const bpfEventSize = 8 + BPFTagSize

// Append appends the record; see Mmap.Append.
func (e *BPFEvent) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, RecordBPFEvent, 0)
	b = le.AppendUint16(b, e.Type)
	b = le.AppendUint16(b, e.Flags)
	b = le.AppendUint32(b, e.ID)
	b = append(b, e.Tag[:]...)
	return finishRecord(b, at, sampleType, sid)
}

// ParseBPFEvent decodes a PERF_RECORD_BPF_EVENT; see ParseMmap for
// sampleType.
func ParseBPFEvent(rec []byte, sampleType uint64) (BPFEvent, SampleID, error) {
	p, _, err := body(rec, RecordBPFEvent, sampleType, bpfEventSize)
	if err != nil {
		return BPFEvent{}, SampleID{}, err
	}
	if len(p) != bpfEventSize {
		return BPFEvent{}, SampleID{}, errorf(headerSize, "BPF_EVENT body of %d bytes, want %d", len(p), bpfEventSize)
	}
	e := BPFEvent{Type: le.Uint16(p), Flags: le.Uint16(p[2:]), ID: le.Uint32(p[4:])}
	copy(e.Tag[:], p[8:])
	sid, err := ParseSampleID(rec, sampleType)
	return e, sid, err
}
