package synth

import (
	"encoding/binary"

	"github.com/synth-dev/synth/perfdata"
)

// mapIdentity is what the dedupe rule compares: a mapping of the same
// process, start, length, page offset, file and protection. The file is
// its name and its identity (maj/min/ino, or the build ID).
type mapIdentity struct {
	pid               uint32
	start, len, pgoff uint64
	prot              uint32
	ident             [24]byte // the MMAP2 union as recorded
	buildID           bool
	file              string
}

// identityOf reads the identity of an MMAP2 record without trailer
// concerns: the fields it uses precede the file name.
func identityOf(rec []byte) (mapIdentity, bool) {
	if len(rec) < mmap2FilenameOff+1 || recType(rec) != perfdata.RecordMmap2 {
		return mapIdentity{}, false
	}
	le := binary.NativeEndian
	id := mapIdentity{
		pid:     le.Uint32(rec[8:]),
		start:   le.Uint64(rec[16:]),
		len:     le.Uint64(rec[24:]),
		pgoff:   le.Uint64(rec[32:]),
		prot:    le.Uint32(rec[64:]),
		buildID: le.Uint16(rec[4:])&perfdata.MiscMmapBuildID != 0,
		file:    cstring(rec[mmap2FilenameOff:]),
	}
	copy(id.ident[:], rec[40:64])
	return id, true
}

// deduper applies the rule of DESIGN.md, "The generation number and the
// dedupe rule", in one place: within generation gen, a synthesized MMAP2
// record S is a duplicate, and dropped, when a live record L of the same
// mapping identity has time(L) < time(S). Live records are never dropped;
// records of another generation are stale.
//
// Live MMAP2 records must come in the same form as the synthesized ones
// to match: with build IDs on, the sideband attr sets build_id so the
// kernel reports live mappings in build-ID form too.
//
// The synthesized and live records of the same process are ordered by
// the process's mmap lock (the iterator reads under the read lock, the
// kernel reports under the write lock), so comparing their timestamps on
// one clock is exact; equal timestamps are not a duplicate.
type deduper struct {
	gen  uint64
	live map[mapIdentity]uint64 // earliest live time of each identity

	Duplicates int // synthesized records dropped
	Stale      int // records of another generation dropped
}

func newDeduper(gen uint64) *deduper {
	return &deduper{gen: gen, live: make(map[mapIdentity]uint64)}
}

// addLive takes a live record of time t; only MMAP2 records matter.
func (d *deduper) addLive(rec []byte, t uint64) {
	id, ok := identityOf(rec)
	if !ok {
		return
	}
	if old, seen := d.live[id]; !seen || t < old {
		d.live[id] = t
	}
}

// keepSynth reports whether a synthesized record of generation gen, read
// at time t, is to be written. All live records that precede it in time
// must have been added first.
func (d *deduper) keepSynth(rec []byte, gen, t uint64) bool {
	if gen != d.gen {
		d.Stale++
		return false
	}
	id, ok := identityOf(rec)
	if !ok {
		return true
	}
	if lt, seen := d.live[id]; seen && lt < t {
		d.Duplicates++
		return false
	}
	return true
}
