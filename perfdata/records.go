package perfdata

// Mmap mirrors PERF_RECORD_MMAP: u32 pid, tid; u64 addr, len, pgoff;
// char filename[].
type Mmap struct {
	Misc      uint16
	Pid, Tid  uint32
	Addr, Len uint64
	Pgoff     uint64
	Filename  string
}

// Append appends the record with a trailer for sampleType; sid nil
// means no trailer.
func (m *Mmap) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, RecordMmap, m.Misc)
	b = le.AppendUint32(b, m.Pid)
	b = le.AppendUint32(b, m.Tid)
	b = le.AppendUint64(b, m.Addr)
	b = le.AppendUint64(b, m.Len)
	b = le.AppendUint64(b, m.Pgoff)
	b = appendString(b, m.Filename)
	return finishRecord(b, at, sampleType, sid)
}

// ParseMmap decodes a PERF_RECORD_MMAP. sampleType selects the trailer
// to expect: the attr's sample_type under sample_id_all, else 0.
func ParseMmap(rec []byte, sampleType uint64) (Mmap, SampleID, error) {
	var m Mmap
	p, h, err := body(rec, RecordMmap, sampleType, 32+1)
	if err != nil {
		return m, SampleID{}, err
	}
	m = Mmap{Misc: h.Misc, Pid: le.Uint32(p), Tid: le.Uint32(p[4:]),
		Addr: le.Uint64(p[8:]), Len: le.Uint64(p[16:]), Pgoff: le.Uint64(p[24:])}
	if m.Filename, err = cString(p[32:], headerSize+32); err != nil {
		return m, SampleID{}, err
	}
	sid, err := ParseSampleID(rec, sampleType)
	return m, sid, err
}

// BuildIDMax is the largest build ID a record holds.
const BuildIDMax = 20

// Mmap2 mirrors PERF_RECORD_MMAP2. The union after pgoff is either
// maj, min, ino, ino_generation, or (with MiscMmapBuildID) u8
// build_id_size, 3 reserved bytes and build_id[20].
type Mmap2 struct {
	Misc          uint16
	Pid, Tid      uint32
	Addr, Len     uint64
	Pgoff         uint64
	Maj, Min      uint32
	Ino           uint64
	InoGeneration uint64
	BuildID       []byte // non-nil selects the build-ID form
	Prot, Flags   uint32
	Filename      string
}

// Append appends the record; a non-nil BuildID (at most BuildIDMax
// bytes; longer is cut) writes the build-ID form and sets
// MiscMmapBuildID, else the maj/min/ino form is written and the bit
// cleared.
func (m *Mmap2) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	misc := m.Misc &^ MiscMmapBuildID
	if m.BuildID != nil {
		misc |= MiscMmapBuildID
	}
	b, at := startRecord(b, RecordMmap2, misc)
	b = le.AppendUint32(b, m.Pid)
	b = le.AppendUint32(b, m.Tid)
	b = le.AppendUint64(b, m.Addr)
	b = le.AppendUint64(b, m.Len)
	b = le.AppendUint64(b, m.Pgoff)
	if m.BuildID != nil {
		id := m.BuildID[:min(len(m.BuildID), BuildIDMax)]
		b = append(b, byte(len(id)), 0, 0, 0)
		b = append(b, id...)
		b = append(b, make([]byte, BuildIDMax-len(id))...)
	} else {
		b = le.AppendUint32(b, m.Maj)
		b = le.AppendUint32(b, m.Min)
		b = le.AppendUint64(b, m.Ino)
		b = le.AppendUint64(b, m.InoGeneration)
	}
	b = le.AppendUint32(b, m.Prot)
	b = le.AppendUint32(b, m.Flags)
	b = appendString(b, m.Filename)
	return finishRecord(b, at, sampleType, sid)
}

// ParseMmap2 decodes a PERF_RECORD_MMAP2 in either form; see ParseMmap
// for sampleType.
func ParseMmap2(rec []byte, sampleType uint64) (Mmap2, SampleID, error) {
	var m Mmap2
	p, h, err := body(rec, RecordMmap2, sampleType, 64+1)
	if err != nil {
		return m, SampleID{}, err
	}
	m = Mmap2{Misc: h.Misc, Pid: le.Uint32(p), Tid: le.Uint32(p[4:]),
		Addr: le.Uint64(p[8:]), Len: le.Uint64(p[16:]), Pgoff: le.Uint64(p[24:]),
		Prot: le.Uint32(p[56:]), Flags: le.Uint32(p[60:])}
	if h.Misc&MiscMmapBuildID != 0 {
		n := int(p[32])
		if n > BuildIDMax {
			return m, SampleID{}, errorf(headerSize+32, "build id size %d", n)
		}
		m.BuildID = append([]byte{}, p[36:36+n]...)
	} else {
		m.Maj, m.Min = le.Uint32(p[32:]), le.Uint32(p[36:])
		m.Ino, m.InoGeneration = le.Uint64(p[40:]), le.Uint64(p[48:])
	}
	if m.Filename, err = cString(p[64:], headerSize+64); err != nil {
		return m, SampleID{}, err
	}
	sid, err := ParseSampleID(rec, sampleType)
	return m, sid, err
}

// Comm mirrors PERF_RECORD_COMM: u32 pid, tid; char comm[].
type Comm struct {
	Misc     uint16
	Pid, Tid uint32
	Comm     string
}

// Append appends the record; see Mmap.Append.
func (c *Comm) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, RecordComm, c.Misc)
	b = le.AppendUint32(b, c.Pid)
	b = le.AppendUint32(b, c.Tid)
	b = appendString(b, c.Comm)
	return finishRecord(b, at, sampleType, sid)
}

// ParseComm decodes a PERF_RECORD_COMM; see ParseMmap for sampleType.
func ParseComm(rec []byte, sampleType uint64) (Comm, SampleID, error) {
	var c Comm
	p, h, err := body(rec, RecordComm, sampleType, 8+1)
	if err != nil {
		return c, SampleID{}, err
	}
	c = Comm{Misc: h.Misc, Pid: le.Uint32(p), Tid: le.Uint32(p[4:])}
	if c.Comm, err = cString(p[8:], headerSize+8); err != nil {
		return c, SampleID{}, err
	}
	sid, err := ParseSampleID(rec, sampleType)
	return c, sid, err
}

// Fork mirrors PERF_RECORD_FORK: u32 pid, ppid, tid, ptid; u64 time.
type Fork struct {
	Misc      uint16 // MiscForkExec on records synthesized for running tasks
	Pid, Ppid uint32
	Tid, Ptid uint32
	Time      uint64
}

// Exit mirrors PERF_RECORD_EXIT, laid out as FORK: the exiting thread
// (Pid, Tid) and its parent (Ppid, Ptid).
type Exit Fork

// Append appends a PERF_RECORD_FORK; see Mmap.Append.
func (f *Fork) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	return appendTask(b, RecordFork, f, sampleType, sid)
}

// Append appends a PERF_RECORD_EXIT; see Mmap.Append.
func (e *Exit) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	return appendTask(b, RecordExit, (*Fork)(e), sampleType, sid)
}

func appendTask(b []byte, typ RecordType, f *Fork, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, typ, f.Misc)
	for _, v := range []uint32{f.Pid, f.Ppid, f.Tid, f.Ptid} {
		b = le.AppendUint32(b, v)
	}
	b = le.AppendUint64(b, f.Time)
	return finishRecord(b, at, sampleType, sid)
}

// ParseFork decodes a PERF_RECORD_FORK; see ParseMmap for sampleType.
func ParseFork(rec []byte, sampleType uint64) (Fork, SampleID, error) {
	return parseTask(rec, RecordFork, sampleType)
}

// ParseExit decodes a PERF_RECORD_EXIT; see ParseMmap for sampleType.
func ParseExit(rec []byte, sampleType uint64) (Exit, SampleID, error) {
	f, sid, err := parseTask(rec, RecordExit, sampleType)
	return Exit(f), sid, err
}

func parseTask(rec []byte, typ RecordType, sampleType uint64) (Fork, SampleID, error) {
	p, h, err := body(rec, typ, sampleType, 24)
	if err != nil {
		return Fork{}, SampleID{}, err
	}
	f := Fork{Misc: h.Misc, Pid: le.Uint32(p), Ppid: le.Uint32(p[4:]), Tid: le.Uint32(p[8:]),
		Ptid: le.Uint32(p[12:]), Time: le.Uint64(p[16:])}
	sid, err := ParseSampleID(rec, sampleType)
	return f, sid, err
}

// Lost mirrors PERF_RECORD_LOST: u64 id, lost.
type Lost struct{ ID, Lost uint64 }

// Append appends the record; see Mmap.Append.
func (l *Lost) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, RecordLost, 0)
	b = le.AppendUint64(b, l.ID)
	b = le.AppendUint64(b, l.Lost)
	return finishRecord(b, at, sampleType, sid)
}

// ParseLost decodes a PERF_RECORD_LOST; see ParseMmap for sampleType.
func ParseLost(rec []byte, sampleType uint64) (Lost, SampleID, error) {
	p, _, err := body(rec, RecordLost, sampleType, 16)
	if err != nil {
		return Lost{}, SampleID{}, err
	}
	sid, err := ParseSampleID(rec, sampleType)
	return Lost{ID: le.Uint64(p), Lost: le.Uint64(p[8:])}, sid, err
}
