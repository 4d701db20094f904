package synth

import (
	"sync"
	"time"

	"github.com/synth-dev/synth/internal/mapread"
	"github.com/synth-dev/synth/internal/procfs"
	"golang.org/x/sys/unix"
)

// procIDs gives the procquery method the build IDs of the files its
// processes map, read in userspace from the files (elfnote), not by the
// kernel: PROCMAP_QUERY's reader looks only at the notes in a file's
// first page, and faults the file's pages in, which blocks the dump for
// ever on a FUSE server that does not answer. Each file is read once per
// dump, on a worker of an idReader; a read not done by the dump's
// deadline is left behind, and the file's mappings get no build ID.
type procIDs struct {
	reader  *idReader[fileIdent]
	mu      sync.Mutex
	dump    map[fileIdent]idResult // results of this dump
	late    map[fileIdent]bool     // files not read in time, this dump
	expired <-chan struct{}
	stop    func() bool // stops the deadline's timer
}

func newProcIDs(timeout time.Duration) *procIDs {
	return &procIDs{reader: newIDReader[fileIdent](timeout)}
}

// begin starts a dump: its deadline runs from now.
func (p *procIDs) begin() {
	p.dump = make(map[fileIdent]idResult)
	p.late = make(map[fileIdent]bool)
	p.reader.mounts.reset()
	p.expired, p.stop = deadline(p.reader.timeout)
}

// end stops the deadline and adds the dump's counts to st.
func (p *procIDs) end(st *Stats) {
	p.stop()
	st.FilesRead += len(p.dump)
	for _, res := range p.dump {
		if res.id != nil {
			st.BuildIDsRead++
		}
	}
	st.BuildIDTimeouts += len(p.late)
}

// of returns the build ID of the file mapping mp of process pid maps, or
// nil. Workers call it concurrently.
func (p *procIDs) of(pid int, mp *procMapping) []byte {
	key := fileIdent{maj: mp.Maj, min: mp.Min, ino: mp.Ino}
	p.mu.Lock()
	res, done := p.dump[key]
	late := p.late[key]
	p.mu.Unlock()
	if done || late {
		return res.id
	}
	at := mappingAt{pid, mp.Start, mp.End}
	rd := p.reader.start(key, func() idResult {
		res, _ := p.reader.readAt(at, procfs.Dev{Maj: mp.Maj, Min: mp.Min}, func(st *mapread.Stat) bool {
			return st.Ino == mp.Ino && unix.Major(st.Dev) == mp.Maj && unix.Minor(st.Dev) == mp.Min
		})
		return res
	})
	res, ok := p.reader.wait(key, rd, p.expired)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !ok:
		p.late[key] = true
	case res.read:
		p.dump[key] = res
	}
	return res.id
}
