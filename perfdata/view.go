package perfdata

import (
	"bytes"
	"iter"
)

// Views read and patch records in place, without decoding or
// allocating: for the paths that look at a field or two of every record
// (the dedupe, a dump's held records, the process table). The offsets
// are those of struct perf_event_header and of each record's layout in
// include/uapi/linux/perf_event.h, here and nowhere else in synth. A
// view does not check its length: its caller holds a whole record of its
// type, as the rings give them, or asks Fits first. Decode, or ParseMmap2
// and the other parsers, check everything, for input not yet trusted.

// Offsets of struct perf_event_header, and of the pid and tid that
// COMM, MMAP, MMAP2 and samples with PERF_SAMPLE_TID start their body
// with.
const (
	offType = 0
	offMisc = 4
	offSize = 6
	offPid  = 8
	offTid  = 12
)

// RecordView is a record of any type.
type RecordView []byte

// Type is the record's type.
func (r RecordView) Type() RecordType { return RecordType(le.Uint32(r[offType:])) }

// Misc is the header's misc field.
func (r RecordView) Misc() uint16 { return le.Uint16(r[offMisc:]) }

// SetMisc sets the header's misc field.
func (r RecordView) SetMisc(misc uint16) { le.PutUint16(r[offMisc:], misc) }

// Size is the record's size as its header says.
func (r RecordView) Size() int { return int(le.Uint16(r[offSize:])) }

// SetSize sets the size in the record's header.
func (r RecordView) SetSize(n int) { le.PutUint16(r[offSize:], uint16(n)) }

// Pid is the process of a COMM, MMAP or MMAP2 record, or the child
// process of a FORK or EXIT record.
func (r RecordView) Pid() uint32 { return le.Uint32(r[offPid:]) }

// Tid is the thread a COMM, MMAP, MMAP2, FORK or EXIT record is about:
// FORK and EXIT keep the child's thread after the parent's process.
func (r RecordView) Tid() uint32 {
	if t := r.Type(); t == RecordFork || t == RecordExit {
		return le.Uint32(r[forkTid:])
	}
	return le.Uint32(r[offTid:])
}

// Offsets of struct perf_record_fork (FORK and EXIT): pid, ppid, tid,
// ptid, time.
const (
	forkPpid = 12
	forkTid  = 16
)

// Ppid is the parent process of a FORK or EXIT record.
func (r RecordView) Ppid() uint32 { return le.Uint32(r[forkPpid:]) }

// TrailerIdentifier is the IDENTIFIER of a record's sample_id_all
// trailer, its last 8 bytes, where the attr's sample_type has
// SampleIdentifier (the trailer's last field); false for a record too
// short to have one. Unlike RecordView's other methods it checks the
// length.
func (r RecordView) TrailerIdentifier() (uint64, bool) {
	if len(r) < headerSize+8 {
		return 0, false
	}
	return le.Uint64(r[len(r)-8:]), true
}

// Offsets of PERF_RECORD_MMAP: pid, tid, addr, len, pgoff, filename.
const mmapFilename = 40

// MmapView is a PERF_RECORD_MMAP record (the kernel's maps are written
// as MMAP, as perf writes them).
type MmapView []byte

// Fits reports whether m is long enough for every accessor: what to ask
// of a record from input not yet trusted.
func (m MmapView) Fits() bool { return len(m) > mmapFilename }

// Pid, Addr, Len and Pgoff are the record's fields, at the offsets
// MMAP2 has them.

func (m MmapView) Pid() uint32   { return le.Uint32(m[offPid:]) }
func (m MmapView) Addr() uint64  { return le.Uint64(m[mmap2Addr:]) }
func (m MmapView) Len() uint64   { return le.Uint64(m[mmap2Len:]) }
func (m MmapView) Pgoff() uint64 { return le.Uint64(m[mmap2Pgoff:]) }

// Filename is the mapping's file name.
func (m MmapView) Filename() []byte { return cStringBytes(m[mmapFilename:]) }

// Offsets of PERF_RECORD_MMAP2: pid, tid, addr, len, pgoff, then either
// maj, min, ino, ino_generation, or (with PERF_RECORD_MISC_MMAP_BUILD_ID)
// u8 build_id_size, 3 reserved bytes and build_id[20]; then prot,
// flags, filename.
const (
	mmap2Addr        = 16
	mmap2Len         = 24
	mmap2Pgoff       = 32
	mmap2Maj         = 40
	mmap2Min         = 44
	mmap2Ino         = 48
	mmap2InoGen      = 56
	mmap2BuildIDSize = 40
	mmap2BuildID     = 44
	mmap2Prot        = 64
	mmap2Flags       = 68
	mmap2Filename    = 72
)

// Mmap2View is a PERF_RECORD_MMAP2 record.
type Mmap2View []byte

// Fits reports whether m is long enough for every accessor: what to ask
// of a record from input not yet trusted.
func (m Mmap2View) Fits() bool { return len(m) > mmap2Filename }

// Pid, Tid, Addr, Len, Pgoff, Prot and Flags are the record's fields.

func (m Mmap2View) Pid() uint32   { return le.Uint32(m[offPid:]) }
func (m Mmap2View) Tid() uint32   { return le.Uint32(m[offTid:]) }
func (m Mmap2View) Addr() uint64  { return le.Uint64(m[mmap2Addr:]) }
func (m Mmap2View) Len() uint64   { return le.Uint64(m[mmap2Len:]) }
func (m Mmap2View) Pgoff() uint64 { return le.Uint64(m[mmap2Pgoff:]) }
func (m Mmap2View) Prot() uint32  { return le.Uint32(m[mmap2Prot:]) }
func (m Mmap2View) Flags() uint32 { return le.Uint32(m[mmap2Flags:]) }

// SetTask sets the record's pid and tid.
func (m Mmap2View) SetTask(pid, tid uint32) {
	le.PutUint32(m[offPid:], pid)
	le.PutUint32(m[offTid:], tid)
}

// SetRange sets the record's addr, len and pgoff.
func (m Mmap2View) SetRange(addr, length, pgoff uint64) {
	le.PutUint64(m[mmap2Addr:], addr)
	le.PutUint64(m[mmap2Len:], length)
	le.PutUint64(m[mmap2Pgoff:], pgoff)
}

// SetProt sets the record's prot and flags.
func (m Mmap2View) SetProt(prot, flags uint32) {
	le.PutUint32(m[mmap2Prot:], prot)
	le.PutUint32(m[mmap2Flags:], flags)
}

// HasBuildID reports whether the record is of the build-ID form.
func (m Mmap2View) HasBuildID() bool { return RecordView(m).Misc()&MiscMmapBuildID != 0 }

// Inode returns maj, min, ino and ino_generation; zero in the build-ID
// form, whose bytes are the build ID's.
func (m Mmap2View) Inode() (maj, min uint32, ino, gen uint64) {
	if m.HasBuildID() {
		return 0, 0, 0, 0
	}
	return le.Uint32(m[mmap2Maj:]), le.Uint32(m[mmap2Min:]), le.Uint64(m[mmap2Ino:]), le.Uint64(m[mmap2InoGen:])
}

// BuildID returns the build ID of a record of the build-ID form, in the
// record's bytes; nil otherwise.
func (m Mmap2View) BuildID() []byte {
	if !m.HasBuildID() {
		return nil
	}
	n := min(int(m[mmap2BuildIDSize]), BuildIDMax)
	return m[mmap2BuildID : mmap2BuildID+n]
}

// BuildIDSize returns the build_id_size byte of a record of the
// build-ID form, which perf trusts: over BuildIDMax, perf 6.1 aborts
// (see ErrBuildIDSize). It is 0 for the other form, or a record too
// short to hold it.
func (m Mmap2View) BuildIDSize() int {
	if !m.HasBuildID() || len(m) <= mmap2BuildIDSize {
		return 0
	}
	return int(m[mmap2BuildIDSize])
}

// ClearBuildID rewrites a record of the build-ID form into the
// maj/min/ino form, in place, with maj, min, ino and ino_generation
// zero: the file is then named by its path alone, as perf names one it
// could not stat.
func (m Mmap2View) ClearBuildID() {
	RecordView(m).SetMisc(RecordView(m).Misc() &^ MiscMmapBuildID)
	if len(m) > mmap2Maj {
		clear(m[mmap2Maj:min(len(m), mmap2Prot)])
	}
}

// SetBuildID rewrites the record into the build-ID form with id (at
// most BuildIDMax bytes; longer is cut), in place: maj, min, ino and
// ino_generation make room for it, and the size does not change.
func (m Mmap2View) SetBuildID(id []byte) {
	n := min(len(id), BuildIDMax)
	m[mmap2BuildIDSize] = byte(n)
	clear(m[mmap2BuildIDSize+1 : mmap2Prot])
	copy(m[mmap2BuildID:], id[:n])
	RecordView(m).SetMisc(RecordView(m).Misc() | MiscMmapBuildID)
}

// FileIdent returns the 24 bytes that name the mapped file, whichever
// the form: maj, min, ino and ino_generation, or the build ID's size and
// bytes. Records of one file and one form have equal bytes.
func (m Mmap2View) FileIdent() (id [24]byte) {
	copy(id[:], m[mmap2Maj:mmap2Prot])
	return id
}

// Filename is the mapping's file name, in the record's bytes.
func (m Mmap2View) Filename() []byte { return cStringBytes(m[mmap2Filename:]) }

// Offset of the count of PERF_RECORD_LOST: id, lost.
const lostLost = 16

// LostView is a PERF_RECORD_LOST record.
type LostView []byte

// Fits reports whether l is long enough for Lost.
func (l LostView) Fits() bool { return len(l) >= lostLost+8 }

// Lost is the count of records lost.
func (l LostView) Lost() uint64 { return le.Uint64(l[lostLost:]) }

// Offsets of PERF_RECORD_BPF_EVENT: u16 type, u16 flags, u32 id, tag.
const (
	bpfEventType = 8
	bpfEventID   = 12
)

// BPFEventView is a PERF_RECORD_BPF_EVENT record.
type BPFEventView []byte

// Fits reports whether b is long enough for its accessors.
func (b BPFEventView) Fits() bool { return len(b) >= bpfEventID+4 }

// EventType is BPFEventProgLoad or BPFEventProgUnload.
func (b BPFEventView) EventType() uint16 { return le.Uint16(b[bpfEventType:]) }

// ID is the program's id.
func (b BPFEventView) ID() uint32 { return le.Uint32(b[bpfEventID:]) }

// Offset of the name in PERF_RECORD_COMM: pid, tid, comm.
const commComm = 16

// CommView is a PERF_RECORD_COMM record.
type CommView []byte

// Comm is the task's name, in the record's bytes.
func (c CommView) Comm() []byte { return cStringBytes(c[commComm:]) }

// cStringBytes returns the NUL-terminated string at the start of b, all
// of b without a NUL.
func cStringBytes(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// Records iterates over records laid back to back, as a HEADER_BUILD_ID
// section or a buffer of records copied out of the rings holds them:
// each is a slice of b, header included. It ends at the end of b, or
// with a *FormatError for a record whose size is out of range.
func Records(b []byte) iter.Seq2[RecordView, error] {
	return func(yield func(RecordView, error) bool) {
		for off := 0; off < len(b); {
			rest := b[off:]
			if len(rest) < headerSize {
				yield(nil, errorf(int64(off), "record header cut short: %d bytes left", len(rest)))
				return
			}
			n := RecordView(rest).Size()
			if n < headerSize || n > len(rest) {
				yield(nil, errorf(int64(off), "record size %d out of range: %d bytes left", n, len(rest)))
				return
			}
			if !yield(RecordView(rest[:n]), nil) {
				return
			}
			off += n
		}
	}
}
