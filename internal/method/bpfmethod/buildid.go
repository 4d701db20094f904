package bpfmethod

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
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

// buildIDs are the build IDs of a method's dumps: the cache in a BPF
// map (objs.BuildIds), and the reads in userspace of the files new to
// it, which begin as the walk notes them (startPending) and end while
// the walk's records are held (resolvePending). It owns the reads; Close
// stops them.
type buildIDs struct {
	objs   *objects
	reader *buildid.Reader[synthbpf.SynthSynthFileKey]
	// early are the files whose read began during this dump's walk
	// (startPending).
	early map[synthbpf.SynthSynthFileKey]struct{}
	// files are the method's files read, the dumps' and the live
	// side's, for the live records (liveIDs), whose times the kernel
	// does not report.
	files *idCache
}

func newBuildIDs(objs *objects, wait time.Duration) *buildIDs {
	return &buildIDs{objs: objs, reader: buildid.NewReader[synthbpf.SynthSynthFileKey](wait),
		early: make(map[synthbpf.SynthSynthFileKey]struct{}), files: newIDCache()}
}

// Close stops the reads under way.
func (ib *buildIDs) Close() error {
	if ib == nil {
		return nil
	}
	return ib.reader.Close()
}

// begin starts a dump's reads: its deadline, which runs from the walk's
// start, as the reads begin when the walk notes their files. stop stops
// its timer.
func (ib *buildIDs) begin() (expired <-chan struct{}, stop func() bool) {
	clear(ib.early)
	return ib.reader.Begin()
}

// resolvePending reads the build IDs of the files the walk noted as new
// to the cache, from the files themselves, and caches them (no build ID
// included) unless their contents may change unseen. It returns the
// build IDs it found, by file.
//
// others names other mappings of a file: the mapping noted for it may
// be gone by now (a short-lived child that mapped it first), and the
// file is then read through another process's. It is asked only then:
// its first call indexes every held record.
func (ib *buildIDs) resolvePending(d *assemble.Assembler, others func(fileIdent) []buildid.Mapping, expired <-chan struct{}) (map[fileIdent][]byte, error) {
	type job struct {
		key   synthbpf.SynthSynthFileKey
		read  *buildid.Job
		again bool // a read through others, the mapping noted being gone
	}
	var (
		key  synthbpf.SynthSynthFileKey
		pend synthbpf.SynthSynthPending
		jobs []job
		it   = ib.objs.Pending.Iterate()
	)
	for it.Next(&key, &pend) {
		// Most reads began when the walk noted the file (startRead);
		// Start hands back the one under way.
		m := buildid.Mapping{Pid: int(pend.Pid), Start: pend.Start, End: pend.End}
		jobs = append(jobs, job{key: key, read: ib.startRead(key, m)})
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
		if !j.again && ib.objs.Pending.Delete(&j.key) != nil {
			return nil, errors.New("delete pending build id")
		}
		res, ok := ib.reader.Wait(j.key, j.read, expired)
		if !ok {
			d.Stats.BuildIDTimeouts++
			continue
		}
		if res.Unmapped && !j.again {
			if tries := others(identOfKey(&j.key)); len(tries) > 0 {
				k := j.key
				jobs = append(jobs, job{key: k, again: true, read: ib.reader.Start(k, func() buildid.Result {
					return ib.readBuildIDOf(&k, tries)
				})})
			}
			continue
		}
		if !res.Read {
			continue // gone or changed: the next dump tries again
		}
		d.Stats.FilesRead++
		ib.files.put(identOfKey(&j.key), res)
		if _, ok := ib.early[j.key]; ok {
			d.Stats.FilesReadEarly++
		}
		if !res.Volatile {
			// A put that fails is a miss: the next dump reads the
			// file again, and this one has its ID from found.
			id := synthbpf.SynthSynthBuildId{Size: uint8(len(res.ID))}
			copy(id.Id[:], res.ID)
			if ib.cachePut(&j.key, &id) != nil {
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
func (ib *buildIDs) countCache(d *assemble.Assembler) error {
	var (
		key synthbpf.SynthSynthFileKey
		id  synthbpf.SynthSynthBuildId
		it  = ib.objs.BuildIds.Iterate()
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
func (ib *buildIDs) readBuildIDOf(key *synthbpf.SynthSynthFileKey, tries []buildid.Mapping) buildid.Result {
	dev := procfs.Dev{Maj: key.Dev >> 20, Min: key.Dev & (1<<20 - 1)}
	for _, m := range tries {
		if res, ok := ib.reader.ReadAt(m, dev, func(st *mapread.Stat) bool { return sameFile(st, key) }); ok {
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
func (ib *buildIDs) cachePut(key *synthbpf.SynthSynthFileKey, id *synthbpf.SynthSynthBuildId) error {
	err := ib.objs.BuildIds.Put(key, id)
	if !errors.Is(err, unix.E2BIG) {
		return err
	}
	var (
		k    synthbpf.SynthSynthFileKey
		v    synthbpf.SynthSynthBuildId
		keys []synthbpf.SynthSynthFileKey
		it   = ib.objs.BuildIds.Iterate()
	)
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	for i := range keys {
		if err := ib.objs.BuildIds.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("empty the build-ID cache: %w", err)
		}
	}
	return ib.objs.BuildIds.Put(key, id)
}

// startRead starts the read of the build ID of the file key names
// through mapping m, unless one is under way: as soon as the walk notes
// the file (a SYNTH_RECORD_PENDING record), so that reads run while the
// walk goes on. Whether the mapping is still there is asked in the read:
// the lstat(2) of its map_files entry waits for the process's mmap lock,
// which a stuck writer may hold past the deadline.
func (ib *buildIDs) startRead(key synthbpf.SynthSynthFileKey, m buildid.Mapping) *buildid.Job {
	return ib.reader.Start(key, func() buildid.Result {
		if !m.Mapped() {
			return buildid.Result{Unmapped: true}
		}
		return ib.readBuildIDOf(&key, []buildid.Mapping{m})
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
func (ib *buildIDs) startPending(rec []byte) error {
	if len(rec) < pendSize {
		return fmt.Errorf("pending record of %d bytes", len(rec))
	}
	var key synthbpf.SynthSynthFileKey
	if _, err := binary.Decode(rec[pendKey:pendStart], hostOrder, &key); err != nil {
		return fmt.Errorf("pending record: %w", err)
	}
	le := hostOrder
	ib.startRead(key, buildid.Mapping{Pid: int(perfdata.RecordView(rec).Pid()), Start: le.Uint64(rec[pendStart:]),
		End: le.Uint64(rec[pendStart+8:])})
	ib.early[key] = struct{}{}
	return nil
}
