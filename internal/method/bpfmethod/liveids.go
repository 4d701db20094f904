package bpfmethod

import (
	"slices"
	"strings"
	"sync/atomic"
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
// each drain gives them the build IDs of their files, read from the
// file, not from process memory, once per file for the method's life
// (idCache): a drain takes a cached ID when a stat(2) of the file shows
// the identity and times it was read with, and reads the file only when
// the cache has none or the file changed. It reaches the file, to stat
// or read it, through the /proc/PID/map_files entry of a mapping a
// record reports, or that led to it before (the cache's); when no
// process maps the file any more (a short-lived process, exited before
// the drain), through the record's path, in this process's mount
// namespace (liveFile.resolve). A record gets the ID only if the file
// was last changed no later than the record's time (fill): a file
// rewritten in place after the mapping keeps its inode. Reads run on
// workers with a deadline; a file of no answer keeps maj/min/ino, as
// perf's own records do.
type liveIDs struct {
	reader *buildid.Reader[fileIdent]
	cache  *idCache // the method's; the dumps' reads feed it too
	// behind are the reads a drain stopped waiting for (a FUSE server
	// that does not answer): later drains do not wait for them again,
	// and read the file anew once they have ended.
	behind map[fileIdent]*buildid.Job
	files  map[fileIdent]*liveFile // this drain's, by want
	// slack is how far a file's change time may be before the change
	// (ns): see fill.
	slack int64
	// found and missed count the records given a build ID and those
	// left without one though their file may have one (unread, or
	// changed since the record); read counts the files read (opened).
	found, missed, read atomic.Uint64
}

// liveFile is a file of a drain's MMAP2 records: the records, the
// mappings to reach it through, one per process, and its name.
type liveFile struct {
	recs  []liveRec
	tries []buildid.Mapping
	path  string
	job   *buildid.Job
}

// liveRec is a drain's MMAP2 record and its time (CLOCK_MONOTONIC).
type liveRec struct {
	m perfdata.Mmap2View
	t uint64
}

func newLiveIDs(wait time.Duration, cache *idCache) *liveIDs {
	if cache == nil {
		cache = newIDCache()
	}
	return &liveIDs{reader: buildid.NewReader[fileIdent](wait), cache: cache, slack: changeSlack(),
		behind: make(map[fileIdent]*buildid.Job), files: make(map[fileIdent]*liveFile)}
}

// changeSlack returns how far a file's change time (ctime) may be
// before the change: the time is the coarse clock's
// (CLOCK_REALTIME_COARSE) unless a fine-grained one was asked for, and
// the coarse clock moves at the tick, at times more than one tick late
// (5 ms at HZ=250, seen in a VM): four ticks, and 20 ms at least.
func changeSlack() int64 {
	const least = int64(20 * time.Millisecond)
	var ts unix.Timespec
	if unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &ts) != nil {
		return least
	}
	return max(4*ts.Nano(), least)
}

// Close stops the reads under way.
func (li *liveIDs) Close() error {
	if li == nil {
		return nil
	}
	return li.reader.Close()
}

// want notes rec, if it is an MMAP2 of a file of the maj/min/ino form,
// and its time t (CLOCK_MONOTONIC), for the next fill.
func (li *liveIDs) want(rec []byte, t uint64) {
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
		f = &liveFile{path: string(m.Filename())}
		li.files[ident] = f
	}
	f.recs = append(f.recs, liveRec{m: m, t: t})
	pid := int(m.Pid())
	if len(f.tries) < maxOthers && !slices.ContainsFunc(f.tries, func(t buildid.Mapping) bool { return t.Pid == pid }) {
		f.tries = append(f.tries, buildid.Mapping{Pid: pid, Start: m.Addr(), End: m.Addr() + m.Len()})
	}
}

// pastDeadline is a deadline already past: a Wait on it does not wait.
var pastDeadline = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// fill finds the build IDs of the files want noted, all at once, waits
// for them until the reader's deadline, and rewrites their records, in
// place, in the build-ID form (of the same size) where a file has one
// and was last changed no later than the record.
//
// A record's time is CLOCK_MONOTONIC, a file's change time (ctime)
// CLOCK_REALTIME: fill converts with the two clocks read together, once
// a drain. A file's ctime is most often the coarse clock's, which can
// lag the change by a tick or more (changeSlack): a file changed after
// the record, within that lag, could show a ctime before it. Where a
// mapping of the file still exists, the inode is the record's (it cannot
// be another file's), and the ctime need only be no later than the
// record: a change within the lag after the record would pass (a
// library rewritten in place while mapped). Where only the record's path
// led to the file, the inode number may be a new file's (the old one
// freed at the exit), or the file rewritten in place right after the
// exit: the ctime must then be at least the slack before the record, so
// that a change after the record is refused, and a file changed within
// the slack before it gets no ID either.
func (li *liveIDs) fill() {
	if li == nil || len(li.files) == 0 {
		return
	}
	defer clear(li.files)
	off := realtimeOffset()
	expired, stop := li.reader.Begin()
	defer stop()
	for ident, f := range li.files {
		if j, ok := li.behind[ident]; ok {
			if _, done := li.reader.Wait(ident, j, pastDeadline); !done {
				li.missed.Add(uint64(len(f.recs)))
				continue // still stuck: these records keep maj/min/ino
			}
			delete(li.behind, ident)
		}
		f.job = li.reader.Start(ident, li.resolve(ident, f.tries, f.path))
	}
	for ident, f := range li.files {
		if f.job == nil {
			continue
		}
		res, ok := li.reader.Wait(ident, f.job, expired)
		if !ok {
			li.behind[ident] = f.job
		}
		if !ok || !res.Read {
			li.missed.Add(uint64(len(f.recs)))
			continue
		}
		if len(res.ID) == 0 {
			continue
		}
		changed := res.Stat.Ctime.Nano()
		if res.Via.Pid == 0 {
			changed += li.slack
		}
		for _, r := range f.recs {
			if int64(r.t)+off < changed {
				li.missed.Add(1)
				continue
			}
			r.m.SetBuildID(res.ID)
			li.found.Add(1)
		}
	}
}

// realtimeOffset returns CLOCK_REALTIME minus CLOCK_MONOTONIC, in ns.
func realtimeOffset() int64 {
	var rt, mono unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &rt)
	return rt.Nano() - mono.Nano()
}

// resolve returns the function that finds the build ID of the file
// ident names: from the cache, if a stat of the file shows it unchanged
// since it was read, else from the file, read through the first of
// tries that still leads to it, or else through path. The result's Via
// is the mapping that led to the file, if any: its Pid 0 when only the
// path did.
func (li *liveIDs) resolve(ident fileIdent, tries []buildid.Mapping, path string) func() buildid.Result {
	dev := procfs.Dev{Maj: ident.maj, Min: ident.min}
	is := func(st *mapread.Stat) bool {
		return st.Ino == ident.ino && unix.Major(st.Dev) == ident.maj && unix.Minor(st.Dev) == ident.min
	}
	return func() buildid.Result {
		if res, ok := li.cached(ident, dev, tries, path, is); ok {
			return res
		}
		for _, m := range tries {
			if res, ok := li.reader.ReadAt(m, dev, is); ok {
				li.read.Add(1)
				li.cache.put(ident, res)
				return res
			}
		}
		if !strings.HasPrefix(path, "/") {
			return buildid.Result{}
		}
		res, ok := li.reader.ReadPath(path, dev, is)
		if !ok {
			return buildid.Result{}
		}
		li.read.Add(1)
		li.cache.put(ident, res)
		return res
	}
}

// cached returns the cache's entry for the file ident names, if a stat
// of the file, through a mapping or else its path, shows it as it was
// read. Files on filesystems whose operations may not end (FUSE, NFS)
// are not stat'ed here: they are read, in the helper.
func (li *liveIDs) cached(ident fileIdent, dev procfs.Dev, tries []buildid.Mapping, path string, is func(*mapread.Stat) bool) (buildid.Result, bool) {
	e, ok := li.cache.get(ident)
	if !ok {
		return buildid.Result{}, false
	}
	hit := func(st *mapread.Stat, via buildid.Mapping) (buildid.Result, bool) {
		if *st != e.st {
			return buildid.Result{}, false // changed: read it anew
		}
		if via.Pid != 0 && via != e.via {
			li.cache.setVia(ident, e.st, via)
		}
		return buildid.Result{ID: e.id, Read: true, Stat: e.st, Via: via}, true
	}
	ways := tries
	if e.via.Pid != 0 {
		ways = append(slices.Clip(tries), e.via)
	}
	for _, m := range ways {
		if !li.reader.Local(dev, m.Pid) {
			return buildid.Result{}, false
		}
		var st unix.Stat_t
		if unix.Stat(mapread.Path(m.Pid, m.Start, m.End), &st) != nil {
			continue // gone
		}
		if ms := mapread.StatOf(&st); is(&ms) {
			return hit(&ms, m)
		}
	}
	if !strings.HasPrefix(path, "/") {
		return buildid.Result{}, false
	}
	if st, ok := li.reader.StatPath(path, dev); ok && is(&st) {
		return hit(&st, buildid.Mapping{})
	}
	return buildid.Result{}, false
}
