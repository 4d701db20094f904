// Package dedupe holds the rule that reports each mapping once: a
// synthesized MMAP2 record is dropped when a live record of the same
// mapping came before it in time, within one dump's generation. The
// Session applies it to the BPF method's dumps, and synth inject to
// perf's stream.
package dedupe

import (
	"strings"

	"github.com/synth-dev/synth/perfdata"
)

// deletedSuffix is what d_path appends to the name of an unlinked file.
const deletedSuffix = " (deleted)"

// mapKey is what the dedupe rule compares: the same process, start,
// length, page offset, protection and file name.
type mapKey struct {
	pid               uint32
	start, len, pgoff uint64
	prot              uint32
	file              string
}

// mapFile is how an MMAP2 record identifies its file: the union of
// maj/min/ino/ino_generation or of the build ID, as recorded.
type mapFile struct {
	buildID bool
	ident   [24]byte
}

// sameFile reports whether two records name the same file. Records of
// different forms cannot be compared (the kernel may have read a build
// ID that the dump did not know, or the other way round): the name and
// region decide.
func (f mapFile) sameFile(o mapFile) bool {
	return f.buildID != o.buildID || f.ident == o.ident
}

// Key is what makes two records report the same mapping, as the rule
// compares them, leaving out the file's identity: a comparable value for
// a map.
type Key = mapKey

// KeyOf returns the key of an MMAP2 record, or of an MMAP record (which
// carries no protection), for a consumer of another live stream to
// apply the dedupe rule with: synth inject's, perf's.
func KeyOf(rec []byte) (Key, bool) {
	if perfdata.RecordView(rec).Type() == perfdata.RecordMmap {
		m := perfdata.MmapView(rec)
		if !m.Fits() {
			return mapKey{}, false
		}
		return mapKey{pid: m.Pid(), start: m.Addr(), len: m.Len(), pgoff: m.Pgoff(), file: string(m.Filename())}, true
	}
	k, _, ok := keyOf(rec)
	return k, ok
}

func keyOf(rec []byte) (mapKey, mapFile, bool) {
	if len(rec) < 8 || perfdata.RecordView(rec).Type() != perfdata.RecordMmap2 || !perfdata.Mmap2View(rec).Fits() {
		return mapKey{}, mapFile{}, false
	}
	m := perfdata.Mmap2View(rec)
	k := mapKey{
		pid:   m.Pid(),
		start: m.Addr(),
		len:   m.Len(),
		pgoff: m.Pgoff(),
		prot:  m.Prot(),
		// A file unlinked after the mmap is named so by the
		// iterator but not by the live record.
		file: strings.TrimSuffix(string(m.Filename()), deletedSuffix),
	}
	f := mapFile{buildID: m.HasBuildID(), ident: m.FileIdent()}
	if f == (mapFile{}) {
		// No file: the kernel reports vm_pgoff (the page number of the
		// start), a dump reports 0, as /proc and perf do.
		k.pgoff = 0
	}
	return k, f, true
}

type liveMap struct {
	time uint64
	file mapFile
}

// Deduper applies the dedupe rule in one place: within generation gen, a synthesized MMAP2
// record S is a duplicate, and dropped, when a live record L of the same
// pid, start, length, page offset, file and protection has
// time(L) < time(S). Live records are never dropped; synthesized records
// of another generation are stale, and dropped.
//
// The synthesized and live records of one process are ordered by the
// process's mmap lock (the iterator reads under the read lock, the kernel
// reports under the write lock), so comparing their times on one clock is
// exact; equal times are not a duplicate.
//
// The live stream of generation gen starts when its dump starts (begin)
// and is forgotten when the dump ends (end): a live record after the end
// cannot precede a synthesized one.
type Deduper struct {
	gen   uint64
	start uint64 // CLOCK_MONOTONIC time at which gen began
	live  map[mapKey][]liveMap
	// starts holds the start time of each generation, gen 1 first.
	starts []uint64

	Duplicates int // synthesized records dropped
	Stale      int // synthesized records of another generation dropped
	// dropped maps the key of each synthesized record dropped in gen to
	// the time of the live record that came first: see Delegated.
	dropped map[mapKey]uint64
}

// New returns a Deduper at generation gen.
func New(gen uint64) *Deduper {
	return &Deduper{gen: gen, live: make(map[mapKey][]liveMap)}
}

// Begin starts generation gen at time start.
func (d *Deduper) Begin(gen, start uint64) {
	d.gen, d.start = gen, start
	clear(d.live)
	d.dropped = make(map[mapKey]uint64) // a new map: Delegated's stays as it was
	for uint64(len(d.starts)) < gen {
		d.starts = append(d.starts, start)
	}
}

// GenOf returns the generation whose live stream a record of time t
// belongs to: the last one that began at or before t, 0 for none.
func (d *Deduper) GenOf(t uint64) uint64 {
	g := len(d.starts)
	for g > 0 && d.starts[g-1] > t {
		g--
	}
	return uint64(g)
}

// End forgets the live records of the generation.
func (d *Deduper) End() { clear(d.live) }

// AddLive takes a live record of time t; only MMAP2 records of the
// current generation's stream matter.
func (d *Deduper) AddLive(rec []byte, t uint64) {
	if t < d.start {
		return
	}
	k, f, ok := keyOf(rec)
	if !ok {
		return
	}
	d.live[k] = append(d.live[k], liveMap{time: t, file: f})
}

// Keep reports whether a synthesized record of generation gen, read
// at time t, is to be written. All live records that precede it in time
// must have been added first.
func (d *Deduper) Keep(rec []byte, gen, t uint64) bool {
	if gen != d.gen {
		d.Stale++
		return false
	}
	if len(d.live) == 0 {
		return true
	}
	k, f, ok := keyOf(rec)
	if !ok {
		return true
	}
	for _, l := range d.live[k] {
		if l.time < t && l.file.sameFile(f) {
			d.Duplicates++
			if _, ok := d.dropped[k]; !ok && d.dropped != nil {
				d.dropped[k] = l.time
			}
			return false
		}
	}
	return true
}

// Delegated is the set of live MMAP2 records that stand for a
// synthesized record a generation dropped as a duplicate: the dump read
// the mapping, but its record of it is the live one. A consumer that
// takes a dump's records as the whole truth about a process, and skips
// the live records older than the dump's read of it (synth's Table),
// must still apply these, or it loses the mapping until the next dump.
type Delegated map[mapKey]uint64

// Delegated returns the live records that stand for the records the
// current generation dropped. It stays as it is when the next one
// begins.
func (d *Deduper) Delegated() Delegated { return d.dropped }

// Has reports whether the live MMAP2 record rec, of time t, stands for a
// dropped synthesized record.
func (dl Delegated) Has(rec []byte, t uint64) bool {
	if len(dl) == 0 {
		return false
	}
	k, _, ok := keyOf(rec)
	if !ok {
		return false
	}
	lt, ok := dl[k]
	return ok && lt == t
}
