package procmethod

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/mapread"
	"github.com/synth-dev/synth/internal/procfs"
)

// procIDs gives the procquery method the build IDs of the files its
// processes map, read in userspace from the files (elfnote), not by the
// kernel: PROCMAP_QUERY's reader looks only at the notes in a file's
// first page, and faults the file's pages in, which blocks the dump for
// ever on a FUSE server that does not answer. Each file is read once per
// dump, on a worker of a buildid.Reader; a read not done by the dump's
// deadline is left behind, and the file's mappings get no build ID.
type procIDs struct {
	reader  *buildid.Reader[fileKey]
	mu      sync.Mutex
	dump    map[fileKey]buildid.Result // results of this dump
	late    map[fileKey]bool           // files not read in time, this dump
	expired <-chan struct{}
	stop    func() bool // stops the deadline's timer
}

// fileKey is a file as /proc/PID/maps names it.
type fileKey struct {
	maj, min uint32
	ino      uint64
}

func newProcIDs(timeout time.Duration) *procIDs {
	return &procIDs{reader: buildid.NewReader[fileKey](timeout)}
}

// begin starts a dump: its deadline runs from now.
func (p *procIDs) begin() {
	p.dump = make(map[fileKey]buildid.Result)
	p.late = make(map[fileKey]bool)
	p.expired, p.stop = p.reader.Begin()
}

// end stops the deadline and adds the dump's counts to st.
func (p *procIDs) end(st *config.Stats) {
	p.stop()
	st.FilesRead += len(p.dump)
	for _, res := range p.dump {
		if res.ID != nil {
			st.BuildIDsRead++
		}
	}
	st.BuildIDTimeouts += len(p.late)
}

// of returns the build ID of the file mapping mp of process pid maps, or
// nil. Workers call it concurrently; w's clock stops while it waits.
func (p *procIDs) of(pid int, mp *procfs.Mapping, w *worker) []byte {
	key := fileKey{maj: mp.Maj, min: mp.Min, ino: mp.Ino}
	p.mu.Lock()
	res, done := p.dump[key]
	late := p.late[key]
	p.mu.Unlock()
	if done || late {
		return res.ID
	}
	at := buildid.Mapping{Pid: pid, Start: mp.Start, End: mp.End}
	j := p.reader.Start(key, func() buildid.Result {
		res, _ := p.reader.ReadAt(at, procfs.Dev{Maj: mp.Maj, Min: mp.Min}, func(st *mapread.Stat) bool {
			return st.Ino == mp.Ino && unix.Major(st.Dev) == mp.Maj && unix.Minor(st.Dev) == mp.Min
		})
		return res
	})
	w.pause()
	res, ok := p.reader.Wait(key, j, p.expired)
	w.resume()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !ok:
		p.late[key] = true
	case res.Read:
		p.dump[key] = res
	}
	return res.ID
}
