package bpfmethod

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"

	"golang.org/x/sys/unix"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/mapread"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
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
func (b *BPF) resolvePending(d *assemble.Assembler, others func(fileIdent) []buildid.Mapping, expired <-chan struct{}) (map[fileIdent][]byte, error) {
	type job struct {
		key   synthbpf.SynthSynthFileKey
		read  *buildid.Job
		again bool // a read through others, the mapping noted being gone
	}
	var (
		key  synthbpf.SynthSynthFileKey
		pend synthbpf.SynthSynthPending
		jobs []job
		it   = b.objs.Pending.Iterate()
	)
	for it.Next(&key, &pend) {
		// Most reads began when the walk noted the file (startRead);
		// Start hands back the one under way.
		m := buildid.Mapping{Pid: int(pend.Pid), Start: pend.Start, End: pend.End}
		jobs = append(jobs, job{key: key, read: b.startRead(key, m)})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read pending build ids: %w", err)
	}
	var found map[fileIdent][]byte
	for i := 0; i < len(jobs); i++ {
		j := jobs[i]
		// A file not read in time is not cached: the next dump's walk
		// notes it again, and takes the result of this read if it has
		// ended by then.
		if !j.again && b.objs.Pending.Delete(&j.key) != nil {
			return nil, errors.New("delete pending build id")
		}
		res, ok := b.ids.Wait(j.key, j.read, expired)
		if !ok {
			d.Stats.BuildIDTimeouts++
			continue
		}
		if res.Unmapped && !j.again {
			if tries := others(identOfKey(&j.key)); len(tries) > 0 {
				k := j.key
				jobs = append(jobs, job{key: k, again: true, read: b.ids.Start(k, func() buildid.Result {
					return b.readBuildIDOf(&k, tries)
				})})
			}
			continue
		}
		if !res.Read {
			continue // gone or changed: the next dump tries again
		}
		d.Stats.FilesRead++
		if _, ok := b.early[j.key]; ok {
			d.Stats.FilesReadEarly++
		}
		if !res.Volatile {
			// A put that fails is a miss: the next dump reads the
			// file again, and this one has its ID from found.
			id := synthbpf.SynthSynthBuildId{Size: uint8(len(res.ID))}
			copy(id.Id[:], res.ID)
			if b.cachePut(&j.key, &id) != nil {
				d.Stats.BuildIDsUncached++
			}
		}
		if len(res.ID) > 0 {
			d.Stats.BuildIDsRead++
			if found == nil {
				found = make(map[fileIdent][]byte)
			}
			found[identOfKey(&j.key)] = res.ID
		}
	}
	return found, nil
}

// countCache counts the files in the build-ID cache with an ID.
func (b *BPF) countCache(d *assemble.Assembler) error {
	var (
		key synthbpf.SynthSynthFileKey
		id  synthbpf.SynthSynthBuildId
		it  = b.objs.BuildIds.Iterate()
	)
	for it.Next(&key, &id) {
		if id.Size > 0 {
			d.Stats.Cached++
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("count build-id cache: %w", err)
	}
	return nil
}

// readBuildIDOf reads the build ID of the file key names through the
// first of tries whose /proc/PID/map_files entry still leads to it (the
// entry reaches files in other mount namespaces, and deleted files).
func (b *BPF) readBuildIDOf(key *synthbpf.SynthSynthFileKey, tries []buildid.Mapping) buildid.Result {
	dev := procfs.Dev{Maj: key.Dev >> 20, Min: key.Dev & (1<<20 - 1)}
	for _, m := range tries {
		if res, ok := b.ids.ReadAt(m, dev, func(st *mapread.Stat) bool { return sameFile(st, key) }); ok {
			return res
		}
	}
	return buildid.Result{}
}

// sameFile reports whether st is the file, with the contents, that key
// names.
func sameFile(st *mapread.Stat, key *synthbpf.SynthSynthFileKey) bool {
	dev := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
	return st.Ino == key.Ino && uint32(dev) == key.Dev &&
		st.Ctime.Sec == key.CtimeSec && uint32(st.Ctime.Nsec)&(1<<30-1) == key.CtimeNsec &&
		st.Mtime.Sec == key.MtimeSec && uint32(st.Mtime.Nsec) == key.MtimeNsec
}

// cachePut puts a build ID into the cache. A full cache is emptied
// first: a new generation of it, whose files are read again as the dumps
// meet them (bpf/buildid.bpf.h).
func (b *BPF) cachePut(key *synthbpf.SynthSynthFileKey, id *synthbpf.SynthSynthBuildId) error {
	err := b.objs.BuildIds.Put(key, id)
	if !errors.Is(err, unix.E2BIG) {
		return err
	}
	var (
		k    synthbpf.SynthSynthFileKey
		v    synthbpf.SynthSynthBuildId
		keys []synthbpf.SynthSynthFileKey
		it   = b.objs.BuildIds.Iterate()
	)
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	for i := range keys {
		if err := b.objs.BuildIds.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("empty the build-ID cache: %w", err)
		}
	}
	return b.objs.BuildIds.Put(key, id)
}

// startRead starts the read of the build ID of the file key names
// through mapping m, unless one is under way: as soon as the walk notes
// the file (a SYNTH_RECORD_PENDING record), so that reads run while the
// walk goes on. Whether the mapping is still there is asked in the read:
// the lstat(2) of its map_files entry waits for the process's mmap lock,
// which a stuck writer may hold past the deadline.
func (b *BPF) startRead(key synthbpf.SynthSynthFileKey, m buildid.Mapping) *buildid.Job {
	return b.ids.Start(key, func() buildid.Result {
		if !m.Mapped() {
			return buildid.Result{Unmapped: true}
		}
		return b.readBuildIDOf(&key, []buildid.Mapping{m})
	})
}

// pendingRec is struct synth_pending_rec after its synth_hdr; offsets
// from the generated layout, as mmap2Next's.
type pendingRec = synthbpf.SynthSynthPendingRec

var (
	pendHdr   = unsafe.Offsetof(pendingRec{}.Header)
	pendKey   = int(unsafe.Offsetof(pendingRec{}.Key) - pendHdr)
	pendStart = int(unsafe.Offsetof(pendingRec{}.Start) - pendHdr)
	pendSize  = int(unsafe.Sizeof(pendingRec{}) - pendHdr)
)

// startPending starts the read of the file a SYNTH_RECORD_PENDING record
// names.
func (b *BPF) startPending(rec []byte) error {
	if len(rec) < pendSize {
		return fmt.Errorf("pending record of %d bytes", len(rec))
	}
	var key synthbpf.SynthSynthFileKey
	if _, err := binary.Decode(rec[pendKey:pendStart], hostOrder, &key); err != nil {
		return fmt.Errorf("pending record: %w", err)
	}
	le := hostOrder
	b.startRead(key, buildid.Mapping{Pid: int(perfdata.RecordView(rec).Pid()), Start: le.Uint64(rec[pendStart:]),
		End: le.Uint64(rec[pendStart+8:])})
	b.early[key] = struct{}{}
	return nil
}
