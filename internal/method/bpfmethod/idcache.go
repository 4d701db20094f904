package bpfmethod

import (
	"sync"

	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/mapread"
)

// maxCached bounds the files an idCache holds.
const maxCached = 8192

// idCache holds the build IDs the method has read from files, a dump's
// and the side-band's, for the method's life (a Session's), by the
// identity a record of the maj/min/ino form carries: device, inode and
// inode generation. An entry keeps the identity and times the file had
// when it was read: a drain takes an entry only if a stat(2) of the file
// (which opens nothing) shows them still, so that a file is read once
// per method, not once per drain; a file rewritten in place keeps its
// inode, and its entry then fails the stat. The dumps' BPF cache, keyed
// by times too, is the walk's; this one serves the live records, whose
// times the kernel does not report. Full, it drops an entry at random:
// that file is read again when next met. Safe for concurrent use (a read
// left behind by a drain ends on a goroutine of its own).
type idCache struct {
	mu sync.Mutex
	m  map[fileIdent]cachedID
}

// cachedID is a file's build ID (nil: none) and the file as read.
type cachedID struct {
	id []byte
	st mapread.Stat
	// via is a mapping that led to the file, through which a later
	// drain can stat it when its own records' processes have exited
	// (a file of another mount namespace); Pid 0: none.
	via buildid.Mapping
}

func newIDCache() *idCache { return &idCache{m: make(map[fileIdent]cachedID)} }

func (c *idCache) get(k fileIdent) (cachedID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e, ok
}

// put caches what res read of the file k names, unless its contents may
// change unseen (tmpfs: Volatile).
func (c *idCache) put(k fileIdent, res buildid.Result) {
	if !res.Read || res.Volatile {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= maxCached {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = cachedID{id: res.ID, st: res.Stat, via: res.Via}
}

// setVia notes m as a mapping that leads to the file k names, as its
// entry has it.
func (c *idCache) setVia(k fileIdent, st mapread.Stat, m buildid.Mapping) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok && e.st == st {
		e.via = m
		c.m[k] = e
	}
}

func (c *idCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
