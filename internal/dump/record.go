package dump

import (
	"encoding/binary"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/perfdata"
)

// BuildIDMax is the largest build ID an MMAP2 record holds.
const BuildIDMax = elfnote.MaxBuildID

// Offsets in a PERF_RECORD_MMAP2 of the build-ID form: header 8, pid/tid
// 8, addr/len/pgoff 24, then u8 size, 3 reserved bytes, build_id[20],
// prot/flags 8, filename.
const (
	Mmap2BuildIDSizeOff = 40
	Mmap2BuildIDOff     = 44
	Mmap2FilenameOff    = 72
)

// Mmap2InoOff is the offset of ino in a PERF_RECORD_MMAP2: header 8,
// pid/tid 8, addr/len/pgoff 24, maj/min 8.
const Mmap2InoOff = 48

// RecType, RecPid and RecTid read a perf record's header and the pid/tid
// that COMM, MMAP and MMAP2 records start with.
func RecType(rec []byte) uint32 { return binary.NativeEndian.Uint32(rec[0:]) }
func RecPid(rec []byte) uint32  { return binary.NativeEndian.Uint32(rec[8:]) }

// RecTid returns the thread a record is about (FORK keeps it at offset 16).
func RecTid(rec []byte) uint32 {
	if RecType(rec) == perfdata.RecordFork {
		return binary.NativeEndian.Uint32(rec[16:])
	}
	return binary.NativeEndian.Uint32(rec[12:])
}

// CString returns the NUL-terminated string at the start of b.
func CString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
