package synth

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/mapread"
	"github.com/synth-dev/synth/internal/procfs"
	"golang.org/x/sys/unix"
)

// cfgBuildID mirrors SYNTH_CFG_BUILDID.
const cfgBuildID = 2

// DefaultBuildIDTimeout is how long a dump waits for the build IDs of
// files new to the cache when Options.BuildIDTimeout is 0.
const DefaultBuildIDTimeout = 2 * time.Second

// buildIDMax is the largest build ID an MMAP2 record holds.
const buildIDMax = elfnote.MaxBuildID

// Filesystems whose pages a shared mapping can change without a new
// modification time: the page stays writable once written, as there is
// no writeback to write-protect it again (statfs(2) f_type).
const (
	tmpfsMagic     = 0x01021994
	ramfsMagic     = 0x858458f6
	hugetlbfsMagic = 0x958458f6
)

// resolvePending reads the build IDs of the files the walk noted as new
// to the cache, from the files themselves, and caches them (no build ID
// included) unless their contents may change unseen. It returns the
// build IDs it found, by file.
//
// others names other mappings of a file: the mapping noted for it may
// be gone by now (a short-lived child that mapped it first), and the
// file is then read through another process's. It is asked only then:
// its first call indexes every held record.
func (b *BPF) resolvePending(d *dump, others func(fileIdent) []mappingAt) (map[fileIdent][]byte, error) {
	type job struct {
		key  synthbpf.SynthSynthFileKey
		read *idRead
	}
	var (
		key  synthbpf.SynthSynthFileKey
		pend synthbpf.SynthSynthPending
		jobs []job
		it   = b.objs.Pending.Iterate()
	)
	b.ids.mounts.reset()
	for it.Next(&key, &pend) {
		tries := []mappingAt{{int(pend.Pid), pend.Start, pend.End}}
		if !mapped(tries[0]) {
			tries = append(tries, others(identOfKey(&key))...)
		}
		k := key
		jobs = append(jobs, job{k, b.ids.start(k, func() idResult { return b.ids.readBuildIDOf(&k, tries) })})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read pending build ids: %w", err)
	}
	expired, stop := deadline(b.ids.timeout)
	defer stop()
	var found map[fileIdent][]byte
	for _, j := range jobs {
		// A file not read in time is not cached: the next dump's walk
		// notes it again, and takes the result of this read if it has
		// ended by then.
		if b.objs.Pending.Delete(&j.key) != nil {
			return nil, errors.New("delete pending build id")
		}
		res, ok := b.ids.wait(j.key, j.read, expired)
		if !ok {
			d.stats.BuildIDTimeouts++
			continue
		}
		if !res.read {
			continue // gone or changed: the next dump tries again
		}
		d.stats.FilesRead++
		if !res.volatile {
			id := synthbpf.SynthSynthBuildId{Size: uint8(len(res.id))}
			copy(id.Id[:], res.id)
			if err := b.objs.BuildIds.Put(&j.key, &id); err != nil {
				return nil, fmt.Errorf("cache build id: %w", err)
			}
		}
		if len(res.id) > 0 {
			d.stats.BuildIDsRead++
			if found == nil {
				found = make(map[fileIdent][]byte)
			}
			found[identOfKey(&j.key)] = res.id
		}
	}
	return found, nil
}

// mapped reports whether the mapping m still has its /proc/PID/map_files
// entry. The entry's own lstat(2) touches neither the file nor its
// filesystem.
func mapped(m mappingAt) bool {
	var st unix.Stat_t
	return unix.Lstat(mapread.Path(m.pid, m.start, m.end), &st) == nil
}

// deadline returns a channel closed after d, and the function that
// stops its timer.
func deadline(d time.Duration) (<-chan struct{}, func() bool) {
	expired := make(chan struct{})
	return expired, time.AfterFunc(d, func() { close(expired) }).Stop
}

// countCache counts the files in the build-ID cache with an ID.
func (b *BPF) countCache(d *dump) error {
	var (
		key synthbpf.SynthSynthFileKey
		id  synthbpf.SynthSynthBuildId
		it  = b.objs.BuildIds.Iterate()
	)
	for it.Next(&key, &id) {
		if id.Size > 0 {
			d.stats.Cached++
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("count build-id cache: %w", err)
	}
	return nil
}

// idReader reads build IDs from files, each file on a goroutine of its
// own, so that a read that blocks (a FUSE server that does not answer,
// a network filesystem) holds up neither the dump nor the other files.
// A dump waits for its reads until a deadline; a read still running then
// is left behind, and its result serves a later dump that notes the file
// again. At most one read per file runs at a time, and at most
// maxIDReads of them within their first timeout.
type idReader[K comparable] struct {
	mounts  mounts         // which files this process reads itself
	helper  mapread.Helper // reads the others
	mu      sync.Mutex
	running map[K]*idRead
	slots   chan struct{}
	timeout time.Duration
}

// maxIDReads bounds the reads that run at once.
const maxIDReads = 16

// idRead is one read of a file's build ID.
type idRead struct {
	done chan struct{}
	res  idResult // set before done is closed
}

type idResult struct {
	id []byte
	// read: the file was read through; id is its build ID, or nil for
	// none. Otherwise no mapping led to the file as the key names it.
	read bool
	// volatile: the file's contents may change without a new key
	// (tmpfs): the result is not cached.
	volatile bool
}

func newIDReader[K comparable](timeout time.Duration) *idReader[K] {
	return &idReader[K]{
		running: make(map[K]*idRead),
		slots:   make(chan struct{}, maxIDReads),
		timeout: cmp.Or(max(timeout, 0), DefaultBuildIDTimeout),
	}
}

// close ends the helper process.
func (r *idReader[K]) close() error { return r.helper.Close() }

// start starts read, the read of the file key names, unless a read of
// it runs already.
func (r *idReader[K]) start(key K, read func() idResult) *idRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rd, ok := r.running[key]; ok {
		return rd
	}
	rd := &idRead{done: make(chan struct{})}
	r.running[key] = rd
	go func() {
		r.slots <- struct{}{}
		// A read that blocks gives its slot up after the timeout.
		var once sync.Once
		release := func() { once.Do(func() { <-r.slots }) }
		t := time.AfterFunc(r.timeout, release)
		rd.res = read()
		t.Stop()
		release()
		close(rd.done)
	}()
	return rd
}

// wait returns the result of rd, or false when expired is closed first.
// A finished read is forgotten: the next start reads the file anew.
func (r *idReader[K]) wait(key K, rd *idRead, expired <-chan struct{}) (idResult, bool) {
	select {
	case <-rd.done:
	case <-expired:
		select {
		case <-rd.done:
		default:
			return idResult{}, false
		}
	}
	r.mu.Lock()
	if r.running[key] == rd {
		delete(r.running, key)
	}
	r.mu.Unlock()
	return rd.res, true
}

// readBuildIDOf reads the build ID of the file key names through the
// first of tries whose /proc/PID/map_files entry still leads to it (the
// entry reaches files in other mount namespaces, and deleted files).
func (r *idReader[K]) readBuildIDOf(key *synthbpf.SynthSynthFileKey, tries []mappingAt) idResult {
	dev := procfs.Dev{Maj: key.Dev >> 20, Min: key.Dev & (1<<20 - 1)}
	for _, m := range tries {
		if res, ok := r.readAt(m, dev, func(st *mapread.Stat) bool { return sameFile(st, key) }); ok {
			return res
		}
	}
	return idResult{}
}

// readAt reads the build ID of the file mapped at m, on device dev, if
// is says that what the mapping leads to is the file wanted, before and
// after the read. A file on a filesystem whose reads may never end is
// read in the helper process.
func (r *idReader[K]) readAt(m mappingAt, dev procfs.Dev, is func(*mapread.Stat) bool) (idResult, bool) {
	path := mapread.Path(m.pid, m.start, m.end)
	var res mapread.Result
	if r.mounts.local(dev, m.pid) {
		res = mapread.Read(path)
	} else {
		var err error
		if res, err = r.helper.Read(path); err != nil {
			return idResult{}, false
		}
	}
	// The contents must not have changed while they were read.
	if !res.Opened || !res.Read || !is(&res.Before) || !is(&res.After) {
		return idResult{}, false
	}
	switch uint32(res.FsType) {
	case tmpfsMagic, ramfsMagic, hugetlbfsMagic:
		return idResult{id: res.ID, read: true, volatile: true}, true
	}
	return idResult{id: res.ID, read: true}, true
}

// sameFile reports whether st is the file, with the contents, that key
// names.
func sameFile(st *mapread.Stat, key *synthbpf.SynthSynthFileKey) bool {
	dev := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
	return st.Ino == key.Ino && uint32(dev) == key.Dev &&
		st.Ctime.Sec == key.CtimeSec && uint32(st.Ctime.Nsec)&(1<<30-1) == key.CtimeNsec &&
		st.Mtime.Sec == key.MtimeSec && uint32(st.Mtime.Nsec) == key.MtimeNsec
}

// kernelBuildID reads the running kernel's build ID from /sys/kernel/notes.
func kernelBuildID() []byte {
	b, err := os.ReadFile("/sys/kernel/notes")
	if err != nil {
		return nil
	}
	return elfnote.FromNotes(b, binary.NativeEndian)
}
