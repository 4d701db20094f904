package synth

import (
	"sync"
	"sync/atomic"
	"time"

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
	reader   *idReader[fileIdent]
	mu       sync.Mutex
	dump     map[fileIdent]idResult // results of this dump
	late     map[fileIdent]bool     // files not read in time, this dump
	expired  chan struct{}
	timer    *time.Timer
	read, ok atomic.Int64 // files read this dump, and of them with an ID
}

func newProcIDs(timeout time.Duration) *procIDs {
	return &procIDs{reader: newIDReader[fileIdent](timeout)}
}

// begin starts a dump: its deadline runs from now.
func (p *procIDs) begin() {
	p.dump = make(map[fileIdent]idResult)
	p.late = make(map[fileIdent]bool)
	p.read.Store(0)
	p.ok.Store(0)
	p.expired = make(chan struct{})
	expired := p.expired
	p.timer = time.AfterFunc(p.reader.timeout, func() { close(expired) })
}

// end stops the deadline and adds the dump's counts to st.
func (p *procIDs) end(st *Stats) {
	p.timer.Stop()
	st.FilesRead += int(p.read.Load())
	st.BuildIDsRead += int(p.ok.Load())
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
		res, _ := readMappedIf(at, func(st *unix.Stat_t) bool {
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
		if _, dup := p.dump[key]; !dup {
			p.dump[key] = res
			p.read.Add(1)
			if res.id != nil {
				p.ok.Add(1)
			}
		}
	}
	return res.id
}
