package bpfmethod

import (
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/mapread"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// liveIDs gives the side-band's MMAP2 records the build IDs of their
// files. The side-band never asks the kernel for them (attr.build_id):
// perf_event_mmap_output() would then set the build-ID bit in the mmap
// event it shares with every other event that reports the mapping, and
// never clear it, so that another program's perf record got MMAP2
// records with the bit over maj/min/ino, which perf aborts on (see
// RingConfig.LiveAttr). The records come in the maj/min/ino form, and
// each drain reads their files' build IDs as a dump reads those of files
// new to its cache: from the file, not from process memory, through the
// /proc/PID/map_files entry of the mapping a record reports, on a worker
// with a deadline; an ID is kept only if the file read was the record's
// device and inode, with the same times before and after the read. A
// file is read once per drain, through the first of its records'
// mappings still there (a short-lived process's may be gone); if none
// is, its records keep maj/min/ino, as perf's own records do.
type liveIDs struct {
	reader *buildid.Reader[fileIdent]
	// behind are the reads a drain stopped waiting for (a FUSE server
	// that does not answer): later drains do not wait for them again,
	// and read the file anew once they have ended.
	behind map[fileIdent]*buildid.Job
	files  map[fileIdent]*liveFile // this drain's, by want
}

// liveFile is a file of a drain's MMAP2 records: the records, and the
// mappings to read it through, one per process.
type liveFile struct {
	recs  []perfdata.Mmap2View
	tries []buildid.Mapping
	job   *buildid.Job
}

func newLiveIDs(wait time.Duration) *liveIDs {
	return &liveIDs{reader: buildid.NewReader[fileIdent](wait),
		behind: make(map[fileIdent]*buildid.Job), files: make(map[fileIdent]*liveFile)}
}

// Close stops the reads under way.
func (li *liveIDs) Close() error {
	if li == nil {
		return nil
	}
	return li.reader.Close()
}

// want notes rec, if it is an MMAP2 of a file of the maj/min/ino form,
// for the next fill.
func (li *liveIDs) want(rec []byte) {
	m := perfdata.Mmap2View(rec)
	if perfdata.RecordView(rec).Type() != perfdata.RecordMmap2 || !m.Fits() || m.HasBuildID() {
		return
	}
	ident := identOf(m)
	if ident.ino == 0 {
		return // anonymous memory
	}
	f := li.files[ident]
	if f == nil {
		f = &liveFile{}
		li.files[ident] = f
	}
	f.recs = append(f.recs, m)
	pid := int(m.Pid())
	if len(f.tries) < maxOthers && !slices.ContainsFunc(f.tries, func(t buildid.Mapping) bool { return t.Pid == pid }) {
		f.tries = append(f.tries, buildid.Mapping{Pid: pid, Start: m.Addr(), End: m.Addr() + m.Len()})
	}
}

// pastDeadline is a deadline already past: a Wait on it does not wait.
var pastDeadline = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// fill reads the files want noted, all at once, waits for them until the
// reader's deadline, and rewrites their records, in place, in the
// build-ID form (of the same size) where a file has one.
func (li *liveIDs) fill() {
	if li == nil || len(li.files) == 0 {
		return
	}
	defer clear(li.files)
	expired, stop := li.reader.Begin()
	defer stop()
	for ident, f := range li.files {
		if j, ok := li.behind[ident]; ok {
			if _, done := li.reader.Wait(ident, j, pastDeadline); !done {
				continue // still stuck: these records keep maj/min/ino
			}
			delete(li.behind, ident)
		}
		f.job = li.reader.Start(ident, li.read(ident, f.tries))
	}
	for ident, f := range li.files {
		if f.job == nil {
			continue
		}
		res, ok := li.reader.Wait(ident, f.job, expired)
		if !ok {
			li.behind[ident] = f.job
			continue
		}
		if len(res.ID) == 0 {
			continue
		}
		for _, m := range f.recs {
			m.SetBuildID(res.ID)
		}
	}
}

// read returns the read of the file ident names through the first of
// tries that still leads to it.
func (li *liveIDs) read(ident fileIdent, tries []buildid.Mapping) func() buildid.Result {
	dev := procfs.Dev{Maj: ident.maj, Min: ident.min}
	is := func(st *mapread.Stat) bool {
		return st.Ino == ident.ino && unix.Major(st.Dev) == ident.maj && unix.Minor(st.Dev) == ident.min
	}
	return func() buildid.Result {
		for _, m := range tries {
			if res, ok := li.reader.ReadAt(m, dev, is); ok {
				return res
			}
		}
		return buildid.Result{}
	}
}
