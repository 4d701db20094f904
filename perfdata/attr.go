package perfdata

import "encoding/binary"

// le is the byte order of everything this package writes and reads.
// perf.data is in the writing host's order; synth runs on little-endian
// hosts (x86-64), and the reader rejects big-endian files.
var le = binary.LittleEndian

// Event types and the software events synth opens and writes
// (enum perf_type_id, enum perf_sw_ids, include/uapi/linux/perf_event.h).
const (
	TypeHardware = 0 // PERF_TYPE_HARDWARE
	TypeSoftware = 1 // PERF_TYPE_SOFTWARE

	CountHWCPUCycles    = 0 // PERF_COUNT_HW_CPU_CYCLES: cycles
	CountHWInstructions = 1 // PERF_COUNT_HW_INSTRUCTIONS: instructions

	CountSWCPUClock  = 0  // PERF_COUNT_SW_CPU_CLOCK: cpu-clock
	CountSWTaskClock = 1  // PERF_COUNT_SW_TASK_CLOCK: task-clock
	CountSWDummy     = 9  // PERF_COUNT_SW_DUMMY: the side-band's dummy event
	CountSWBPFOutput = 10 // PERF_COUNT_SW_BPF_OUTPUT: the rings of BPF programs
)

// AttrSize is the size of the attrs written: PERF_ATTR_SIZE_VER7. perf
// 6.1 refuses attrs larger than the struct it was built with.
const AttrSize = 128

// Attr mirrors struct perf_event_attr (include/uapi/linux/perf_event.h)
// up to sig_data, the end of PERF_ATTR_SIZE_VER7.
type Attr struct {
	Type             uint32
	Size             uint32
	Config           uint64
	SamplePeriod     uint64 // or sample_freq, with AttrFreq
	SampleType       uint64
	ReadFormat       uint64
	Flags            uint64 // the bitfield word: Attr* constants
	WakeupEvents     uint32 // or wakeup_watermark, with AttrWatermark
	BPType           uint32
	Config1          uint64
	Config2          uint64
	BranchSampleType uint64
	SampleRegsUser   uint64
	SampleStackUser  uint32
	ClockID          int32
	SampleRegsIntr   uint64
	AuxWatermark     uint32
	SampleMaxStack   uint16
	AuxSampleSize    uint32
	SigData          uint64
}

// Append encodes a as AttrSize bytes, with AttrSize in its size field
// whatever a.Size says: perf finds what follows an attr by that field.
// An attr of an older ABI reads the same with its new fields zero; the
// fields of a newer one (config3, PERF_ATTR_SIZE_VER8) are not written.
func (a *Attr) Append(b []byte) []byte {
	b = le.AppendUint32(b, a.Type)
	b = le.AppendUint32(b, AttrSize)
	for _, v := range []uint64{a.Config, a.SamplePeriod, a.SampleType, a.ReadFormat, a.Flags} {
		b = le.AppendUint64(b, v)
	}
	b = le.AppendUint32(b, a.WakeupEvents)
	b = le.AppendUint32(b, a.BPType)
	for _, v := range []uint64{a.Config1, a.Config2, a.BranchSampleType, a.SampleRegsUser} {
		b = le.AppendUint64(b, v)
	}
	b = le.AppendUint32(b, a.SampleStackUser)
	b = le.AppendUint32(b, uint32(a.ClockID))
	b = le.AppendUint64(b, a.SampleRegsIntr)
	b = le.AppendUint32(b, a.AuxWatermark)
	b = le.AppendUint16(b, a.SampleMaxStack)
	b = le.AppendUint16(b, 0) // __reserved_2
	b = le.AppendUint32(b, a.AuxSampleSize)
	b = le.AppendUint32(b, 0) // __reserved_3
	return le.AppendUint64(b, a.SigData)
}

// minAttrSize is PERF_ATTR_SIZE_VER0.
const minAttrSize = 64

// ParseAttr decodes an attr of b's length (at least PERF_ATTR_SIZE_VER0);
// fields past the end of b are zero, bytes past AttrSize are ignored.
func ParseAttr(b []byte) (Attr, error) {
	if len(b) < minAttrSize {
		return Attr{}, errorf(0, "attr of %d bytes", len(b))
	}
	var full [AttrSize]byte
	copy(full[:], b)
	p := full[:]
	u32 := func(off int) uint32 { return le.Uint32(p[off:]) }
	u64 := func(off int) uint64 { return le.Uint64(p[off:]) }
	return Attr{
		Type: u32(0), Size: u32(4), Config: u64(8), SamplePeriod: u64(16),
		SampleType: u64(24), ReadFormat: u64(32), Flags: u64(40),
		WakeupEvents: u32(48), BPType: u32(52), Config1: u64(56), Config2: u64(64),
		BranchSampleType: u64(72), SampleRegsUser: u64(80), SampleStackUser: u32(88),
		ClockID: int32(u32(92)), SampleRegsIntr: u64(96), AuxWatermark: u32(104),
		SampleMaxStack: le.Uint16(p[108:]), AuxSampleSize: u32(112), SigData: u64(120),
	}, nil
}
