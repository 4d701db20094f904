package dedupe

import (
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

func mmap2(pid uint32, start, length, pgoff uint64, prot uint32, file string, ino uint64) []byte {
	m := perfdata.Mmap2{Misc: perfdata.MiscUser, Pid: pid, Tid: pid, Addr: start, Len: length,
		Pgoff: pgoff, Ino: ino, Prot: prot, Flags: 2, Filename: file}
	if ino != 0 {
		m.Maj, m.Min = 8, 1
	}
	return m.Append(nil, 0, nil)
}

func TestDedupeRule(t *testing.T) {
	base := mmap2(10, 0x1000, 0x2000, 0, 5, "/lib/a.so", 7)
	for _, tc := range []struct {
		name  string
		live  []byte
		lt    uint64
		synth []byte
		gen   uint64
		st    uint64
		keep  bool
	}{
		{"live before: duplicate", base, 100, base, 1, 200, false},
		{"live after: the iterator saw it first", base, 300, base, 1, 200, true},
		{"equal timestamps: not a duplicate", base, 200, base, 1, 200, true},
		{"other process", mmap2(11, 0x1000, 0x2000, 0, 5, "/lib/a.so", 7), 100, base, 1, 200, true},
		{"same region, other file name", mmap2(10, 0x1000, 0x2000, 0, 5, "/lib/b.so", 7), 100, base, 1, 200, true},
		{"same region and name, other inode", mmap2(10, 0x1000, 0x2000, 0, 5, "/lib/a.so", 8), 100, base, 1, 200, true},
		{"other protection (mprotect)", mmap2(10, 0x1000, 0x2000, 0, 1, "/lib/a.so", 7), 100, base, 1, 200, true},
		{"other page offset", mmap2(10, 0x1000, 0x2000, 0x1000, 5, "/lib/a.so", 7), 100, base, 1, 200, true},
		// A live mmap the kernel merged into the VMA before it: the
		// iterator reports the merged VMA, a different region: kept.
		{"merged VMA", mmap2(10, 0x2000, 0x1000, 0x1000, 5, "/lib/a.so", 7), 100, base, 1, 200, true},
		{"file unlinked between the mmap and the dump", base, 100, mmap2(10, 0x1000, 0x2000, 0, 5, "/lib/a.so (deleted)", 7), 1, 200, false},
		{"anonymous: the kernel's pgoff is the start page", mmap2(10, 0x7f0000000000, 0x2000, 0x7f0000000000, 3, "//anon", 0), 100,
			mmap2(10, 0x7f0000000000, 0x2000, 0, 3, "//anon", 0), 1, 200, false},
		{"file at another offset", mmap2(10, 0x1000, 0x2000, 0x5000, 5, "/lib/a.so", 7), 100, base, 1, 200, true},
		{"stale generation", nil, 0, base, 0, 200, false},
	} {
		d := New(1)
		if tc.live != nil {
			d.AddLive(tc.live, tc.lt)
		}
		if got := d.Keep(tc.synth, tc.gen, tc.st); got != tc.keep {
			t.Errorf("%s: keep=%v, want %v", tc.name, got, tc.keep)
		}
		wantDup, wantStale := 0, 0
		if !tc.keep && tc.gen == 1 {
			wantDup = 1
		}
		if tc.gen != 1 {
			wantStale = 1
		}
		if d.Duplicates != wantDup || d.Stale != wantStale {
			t.Errorf("%s: duplicates %d stale %d", tc.name, d.Duplicates, d.Stale)
		}
	}
}

// The earliest live time counts: a mapping reported live twice (unmapped
// and mapped again) is a duplicate of a synthesized record read after the
// first report.
func TestDedupeEarliestLive(t *testing.T) {
	rec := mmap2(10, 0x1000, 0x1000, 0, 5, "/x", 1)
	d := New(3)
	d.AddLive(rec, 500)
	d.AddLive(rec, 100)
	if d.Keep(rec, 3, 300) {
		t.Error("kept a record read after a live report of it")
	}
	// The kernel read a build ID the dump did not know: the build-ID
	// form and the maj/min/ino form of one name and region are one file.
	m := perfdata.Mmap2{Misc: perfdata.MiscUser | perfdata.MiscMmapBuildID, Pid: 10, Addr: 0x1000, Len: 0x1000, Prot: 5, Filename: "/x", BuildID: []byte{1, 2}}
	d = New(3)
	d.AddLive(m.Append(nil, 0, nil), 200)
	if d.Keep(rec, 3, 300) || d.Duplicates != 1 {
		t.Errorf("kept a maj/min/ino record after a build-ID live record of it (duplicates %d)", d.Duplicates)
	}
}

// A generation's live stream starts with its dump and ends with it.
func TestDedupeGenerationWindow(t *testing.T) {
	rec := mmap2(10, 0x1000, 0x1000, 0, 5, "/x", 1)
	d := New(0)
	d.Begin(1, 1000)
	d.AddLive(rec, 900) // before the dump began: the previous stream's
	if !d.Keep(rec, 1, 1100) {
		t.Error("a live record from before the generation began dropped a synthesized one")
	}
	d.AddLive(rec, 1050)
	if d.Keep(rec, 1, 1100) {
		t.Error("kept a duplicate")
	}
	d.End()
	d.Begin(2, 2000)
	if !d.Keep(rec, 2, 2100) {
		t.Error("the previous generation's live records leaked into the next")
	}
	if d.Keep(rec, 1, 2100) || d.Stale != 1 {
		t.Errorf("generation 1 record kept in generation 2 (stale %d)", d.Stale)
	}
}
