package perfdata

import "math/bits"

// sample_type bits past SampleRaw (enum perf_event_sample_format).
const (
	SampleBranchStack  = 1 << 11
	SampleRegsUser     = 1 << 12
	SampleStackUser    = 1 << 13
	SampleWeight       = 1 << 14
	SampleDataSrc      = 1 << 15
	SampleTransaction  = 1 << 17
	SampleRegsIntr     = 1 << 18
	SamplePhysAddr     = 1 << 19
	SampleAux          = 1 << 20
	SampleCgroup       = 1 << 21
	SampleDataPageSize = 1 << 22
	SampleCodePageSize = 1 << 23
	SampleWeightStruct = 1 << 24
)

// read_format bits (enum perf_event_read_format).
const (
	ReadTotalTimeEnabled = 1 << 0
	ReadTotalTimeRunning = 1 << 1
	ReadID               = 1 << 2
	ReadGroup            = 1 << 3
	ReadLost             = 1 << 4
)

// BranchHWIndex is PERF_SAMPLE_BRANCH_HW_INDEX of branch_sample_type: a
// branch stack then starts with the hardware index.
const BranchHWIndex = 1 << 17

// Sample mirrors PERF_RECORD_SAMPLE. Which fields it holds is the
// sample_type of its attr, and the layout of some fields other parts of
// the attr: read_format, branch_sample_type, the register masks.
type Sample struct {
	Misc       uint16
	Identifier uint64 // SampleIdentifier
	IP         uint64 // SampleIP
	Pid, Tid   uint32 // SampleTID
	Time       uint64 // SampleTime
	Addr       uint64 // SampleAddr
	ID         uint64 // SampleTypeID
	StreamID   uint64 // SampleStreamID
	CPU        uint32 // SampleCPU
	Period     uint64 // SamplePeriod
	Read       ReadValues
	Callchain  []uint64 // SampleCallchain: PERF_CONTEXT_* markers included
	Raw        []byte   // SampleRaw, padding included
	// SampleBranchStack: the hardware index (with BranchHWIndex), then
	// the branches.
	BranchHWIndex uint64
	Branches      []Branch
	RegsUserABI   uint64   // SampleRegsUser: 0 means no registers
	RegsUser      []uint64 // one per bit of sample_regs_user
	StackUser     []byte   // SampleStackUser
	StackUserDyn  uint64   // the part of StackUser that is valid
	Weight        uint64   // SampleWeight or SampleWeightStruct
	DataSrc       uint64
	Transaction   uint64
	RegsIntrABI   uint64
	RegsIntr      []uint64 // one per bit of sample_regs_intr
	PhysAddr      uint64
	Aux           []byte
	Cgroup        uint64
	DataPageSize  uint64
	CodePageSize  uint64
}

// ReadValues mirrors struct read_format: one value, or with ReadGroup
// one per member of the group.
type ReadValues struct {
	TimeEnabled, TimeRunning uint64
	Values                   []ReadValue
}

// ReadValue is one counter of a read_format.
type ReadValue struct{ Value, ID, Lost uint64 }

// Branch mirrors struct perf_branch_entry; Flags is its bitfield word.
type Branch struct{ From, To, Flags uint64 }

// sampleDecoder reads u64s off a sample's body, and fails once past its
// end instead of panicking.
type sampleDecoder struct {
	p   []byte
	off int64
	err error
}

func (d *sampleDecoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.p) < 8 {
		d.err = errorf(d.off, "sample ends inside a field")
		return 0
	}
	v := le.Uint64(d.p)
	d.p, d.off = d.p[8:], d.off+8
	return v
}

// u64s reads n u64s; n comes from the input, so it is checked against
// what is left before anything is allocated.
func (d *sampleDecoder) u64s(n uint64) []uint64 {
	if d.err != nil || n == 0 {
		return nil
	}
	if n > uint64(len(d.p))/8 {
		d.err = errorf(d.off, "%d entries, past the end of the sample", n)
		return nil
	}
	v := make([]uint64, n)
	for i := range v {
		v[i] = d.u64()
	}
	return v
}

// bytes reads n bytes, checked as u64s does.
func (d *sampleDecoder) bytes(n uint64) []byte {
	if d.err != nil || n == 0 {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.err = errorf(d.off, "%d bytes, past the end of the sample", n)
		return nil
	}
	v := append([]byte(nil), d.p[:n]...)
	d.p, d.off = d.p[n:], d.off+int64(n)
	return v
}

// ParseSample decodes a PERF_RECORD_SAMPLE of an event of attr a.
func ParseSample(rec []byte, a *Attr) (Sample, error) {
	p, h, err := body(rec, RecordSample, 0, 0)
	if err != nil {
		return Sample{}, err
	}
	st := a.SampleType
	s := Sample{Misc: h.Misc}
	d := &sampleDecoder{p: p, off: headerSize}
	opt := func(bit uint64, v *uint64) {
		if st&bit != 0 {
			*v = d.u64()
		}
	}
	opt(SampleIdentifier, &s.Identifier)
	opt(SampleIP, &s.IP)
	if st&SampleTID != 0 {
		v := d.u64()
		s.Pid, s.Tid = uint32(v), uint32(v>>32)
	}
	opt(SampleTime, &s.Time)
	opt(SampleAddr, &s.Addr)
	opt(SampleTypeID, &s.ID)
	opt(SampleStreamID, &s.StreamID)
	if st&SampleCPU != 0 {
		s.CPU = uint32(d.u64())
	}
	opt(SamplePeriod, &s.Period)
	if st&SampleRead != 0 {
		s.Read = d.readValues(a.ReadFormat)
	}
	if st&SampleCallchain != 0 {
		s.Callchain = d.u64s(d.u64())
	}
	if st&SampleRaw != 0 {
		s.Raw = d.raw()
	}
	if st&SampleBranchStack != 0 {
		s.BranchHWIndex, s.Branches = d.branches(a.BranchSampleType)
	}
	if st&SampleRegsUser != 0 {
		s.RegsUserABI, s.RegsUser = d.regs(a.SampleRegsUser)
	}
	if st&SampleStackUser != 0 {
		if s.StackUser = d.bytes(d.u64()); len(s.StackUser) > 0 {
			s.StackUserDyn = d.u64()
		}
	}
	if st&(SampleWeight|SampleWeightStruct) != 0 {
		s.Weight = d.u64()
	}
	opt(SampleDataSrc, &s.DataSrc)
	opt(SampleTransaction, &s.Transaction)
	if st&SampleRegsIntr != 0 {
		s.RegsIntrABI, s.RegsIntr = d.regs(a.SampleRegsIntr)
	}
	opt(SamplePhysAddr, &s.PhysAddr)
	if st&SampleAux != 0 {
		s.Aux = d.bytes(d.u64())
	}
	opt(SampleCgroup, &s.Cgroup)
	opt(SampleDataPageSize, &s.DataPageSize)
	opt(SampleCodePageSize, &s.CodePageSize)
	if d.err == nil && len(d.p) != 0 {
		d.err = errorf(d.off, "%d bytes after the last field of the sample", len(d.p))
	}
	return s, d.err
}

func (d *sampleDecoder) readValues(rf uint64) ReadValues {
	var r ReadValues
	n := uint64(1)
	if rf&ReadGroup != 0 {
		n = d.u64()
	}
	if rf&ReadGroup == 0 {
		r.Values = []ReadValue{{Value: d.u64()}}
	}
	if rf&ReadTotalTimeEnabled != 0 {
		r.TimeEnabled = d.u64()
	}
	if rf&ReadTotalTimeRunning != 0 {
		r.TimeRunning = d.u64()
	}
	per := uint64(1 + bits.OnesCount64(rf&(ReadID|ReadLost)))
	if rf&ReadGroup != 0 {
		if n > uint64(len(d.p))/8/per {
			d.err = errorf(d.off, "group of %d, past the end of the sample", n)
			return r
		}
		r.Values = make([]ReadValue, n)
	}
	for i := range r.Values {
		v := &r.Values[i]
		if rf&ReadGroup != 0 {
			v.Value = d.u64()
		}
		if rf&ReadID != 0 {
			v.ID = d.u64()
		}
		if rf&ReadLost != 0 {
			v.Lost = d.u64()
		}
	}
	return r
}

// raw reads u32 size and size bytes; the size counts the padding that
// keeps the sample 8-byte aligned.
func (d *sampleDecoder) raw() []byte {
	if d.err != nil {
		return nil
	}
	if len(d.p) < 4 {
		d.err = errorf(d.off, "sample ends inside a field")
		return nil
	}
	n := le.Uint32(d.p)
	d.p, d.off = d.p[4:], d.off+4
	if n == 0 {
		return []byte{}
	}
	return d.bytes(uint64(n))
}

func (d *sampleDecoder) branches(bst uint64) (uint64, []Branch) {
	n := d.u64()
	var idx uint64
	if bst&BranchHWIndex != 0 {
		idx = d.u64()
	}
	if d.err != nil || n == 0 {
		return idx, nil
	}
	if n > uint64(len(d.p))/24 {
		d.err = errorf(d.off, "%d branches, past the end of the sample", n)
		return idx, nil
	}
	bs := make([]Branch, n)
	for i := range bs {
		bs[i] = Branch{From: d.u64(), To: d.u64(), Flags: d.u64()}
	}
	return idx, bs
}

// regs reads u64 abi and, unless it is 0, one u64 per bit of mask.
func (d *sampleDecoder) regs(mask uint64) (uint64, []uint64) {
	abi := d.u64()
	if abi == 0 {
		return 0, nil
	}
	return abi, d.u64s(uint64(bits.OnesCount64(mask)))
}

// Append appends the sample as an event of attr a writes it: the fields
// of a.SampleType, in the kernel's order. The slices must agree with the
// attr: RegsUser and RegsIntr one value per bit of their mask (when
// their ABI is not 0), Raw 4 bytes short of a multiple of 8.
func (s *Sample) Append(b []byte, a *Attr) []byte {
	st := a.SampleType
	b, at := startRecord(b, RecordSample, s.Misc)
	opt := func(bit, v uint64) {
		if st&bit != 0 {
			b = le.AppendUint64(b, v)
		}
	}
	opt(SampleIdentifier, s.Identifier)
	opt(SampleIP, s.IP)
	opt(SampleTID, uint64(s.Pid)|uint64(s.Tid)<<32)
	opt(SampleTime, s.Time)
	opt(SampleAddr, s.Addr)
	opt(SampleTypeID, s.ID)
	opt(SampleStreamID, s.StreamID)
	opt(SampleCPU, uint64(s.CPU))
	opt(SamplePeriod, s.Period)
	if st&SampleRead != 0 {
		b = s.Read.append(b, a.ReadFormat)
	}
	if st&SampleCallchain != 0 {
		b = appendU64s(le.AppendUint64(b, uint64(len(s.Callchain))), s.Callchain)
	}
	if st&SampleRaw != 0 {
		b = append(le.AppendUint32(b, uint32(len(s.Raw))), s.Raw...)
	}
	if st&SampleBranchStack != 0 {
		b = le.AppendUint64(b, uint64(len(s.Branches)))
		if a.BranchSampleType&BranchHWIndex != 0 {
			b = le.AppendUint64(b, s.BranchHWIndex)
		}
		for _, br := range s.Branches {
			b = appendU64s(b, []uint64{br.From, br.To, br.Flags})
		}
	}
	if st&SampleRegsUser != 0 {
		b = appendRegs(b, s.RegsUserABI, s.RegsUser)
	}
	if st&SampleStackUser != 0 {
		b = append(le.AppendUint64(b, uint64(len(s.StackUser))), s.StackUser...)
		if len(s.StackUser) > 0 {
			b = le.AppendUint64(b, s.StackUserDyn)
		}
	}
	opt(SampleWeight|SampleWeightStruct, s.Weight)
	opt(SampleDataSrc, s.DataSrc)
	opt(SampleTransaction, s.Transaction)
	if st&SampleRegsIntr != 0 {
		b = appendRegs(b, s.RegsIntrABI, s.RegsIntr)
	}
	opt(SamplePhysAddr, s.PhysAddr)
	if st&SampleAux != 0 {
		b = append(le.AppendUint64(b, uint64(len(s.Aux))), s.Aux...)
	}
	opt(SampleCgroup, s.Cgroup)
	opt(SampleDataPageSize, s.DataPageSize)
	opt(SampleCodePageSize, s.CodePageSize)
	return finishRecord(b, at, 0, nil)
}

func (r *ReadValues) append(b []byte, rf uint64) []byte {
	group := rf&ReadGroup != 0
	vals := r.Values
	if group {
		b = le.AppendUint64(b, uint64(len(vals)))
	} else {
		// Exactly one counter, whatever Values holds.
		one := ReadValue{}
		if len(vals) > 0 {
			one = vals[0]
		}
		vals = []ReadValue{one}
		b = le.AppendUint64(b, one.Value)
	}
	if rf&ReadTotalTimeEnabled != 0 {
		b = le.AppendUint64(b, r.TimeEnabled)
	}
	if rf&ReadTotalTimeRunning != 0 {
		b = le.AppendUint64(b, r.TimeRunning)
	}
	for _, v := range vals {
		if group {
			b = le.AppendUint64(b, v.Value)
		}
		if rf&ReadID != 0 {
			b = le.AppendUint64(b, v.ID)
		}
		if rf&ReadLost != 0 {
			b = le.AppendUint64(b, v.Lost)
		}
	}
	return b
}

func appendU64s(b []byte, vs []uint64) []byte {
	for _, v := range vs {
		b = le.AppendUint64(b, v)
	}
	return b
}

func appendRegs(b []byte, abi uint64, regs []uint64) []byte {
	b = le.AppendUint64(b, abi)
	if abi == 0 {
		return b
	}
	return appendU64s(b, regs)
}

// SampleView is a PERF_RECORD_SAMPLE read in place, as the other views
// are (view.go): each field at its place after the fields before it, as
// the event's sample_type st lays them out, without decoding the rest.
// Unlike the other views it checks the record's length, since where a
// field lies depends on st: each method returns false when st has no
// such field or the record is too short to hold it.
type SampleView []byte

// Time is the sample's TIME.
func (rec SampleView) Time(st uint64) (uint64, bool) {
	if st&SampleTime == 0 {
		return 0, false
	}
	off := headerSize
	for _, bit := range []uint64{SampleIdentifier, SampleIP, SampleTID} {
		if st&bit != 0 {
			off += 8
		}
	}
	if len(rec) < off+8 {
		return 0, false
	}
	return le.Uint64(rec[off:]), true
}

// TID is the sample's pid and tid.
func (rec SampleView) TID(st uint64) (pid, tid uint32, ok bool) {
	if st&SampleTID == 0 {
		return 0, 0, false
	}
	off := headerSize
	for _, bit := range []uint64{SampleIdentifier, SampleIP} {
		if st&bit != 0 {
			off += 8
		}
	}
	if len(rec) < off+8 {
		return 0, 0, false
	}
	return le.Uint32(rec[off:]), le.Uint32(rec[off+4:]), true
}

// Identifier is the sample's IDENTIFIER, its first field where
// sample_type has SampleIdentifier.
func (rec SampleView) Identifier() (uint64, bool) {
	if len(rec) < headerSize+8 {
		return 0, false
	}
	return le.Uint64(rec[headerSize:]), true
}

// Raw is the sample's RAW data, in place: the size bytes after its u32
// size (the kernel counts the padding to 8 bytes in that size); false
// also where st has READ, whose size depends on the read_format.
func (rec SampleView) Raw(st uint64) ([]byte, bool) {
	if st&SampleRaw == 0 || st&SampleRead != 0 {
		return nil, false
	}
	off := headerSize
	for _, f := range []struct {
		bit  uint64
		size int
	}{{SampleIdentifier, 8}, {SampleIP, 8}, {SampleTID, 8}, {SampleTime, 8}, {SampleAddr, 8},
		{SampleTypeID, 8}, {SampleStreamID, 8}, {SampleCPU, 8}, {SamplePeriod, 8}} {
		if st&f.bit != 0 {
			off += f.size
		}
	}
	if st&SampleCallchain != 0 {
		if len(rec) < off+8 {
			return nil, false
		}
		nr := le.Uint64(rec[off:])
		if nr > uint64(len(rec)) {
			return nil, false
		}
		off += 8 + 8*int(nr)
	}
	if len(rec) < off+4 {
		return nil, false
	}
	size := int(le.Uint32(rec[off:]))
	if size > len(rec)-off-4 {
		return nil, false
	}
	return rec[off+4 : off+4+size], true
}
