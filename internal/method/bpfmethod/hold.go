package bpfmethod

import (
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// walkHold keeps the MMAP2 records of a dump per process until the
// process's walk is known to hold, and until their build IDs are known,
// then hands them to the assembler in perf's order (flushSome). The
// records themselves are in its blocks (holdBlocks).
type walkHold struct {
	d      *assemble.Assembler
	blocks holdBlocks
	procs  map[uint32][]holdLoc
	// spare are the lists of procs of the dump before, emptied, by
	// process: a process's list is grown once, not at every dump (a
	// host's processes and their sizes change little from one dump to
	// the next; 500k VMAs grew 5 MB of lists a dump).
	spare    map[uint32][]holdLoc
	curPid   uint32                          // the process keep adds to, and its list not yet
	cur      []holdLoc                       // in procs (see putCur)
	others   map[fileIdent][]buildid.Mapping // see mappingsOf; nil until asked
	order    []uint32                        // pids of procs, ascending, for flushSome
	pi, ri   int                             // flushSome's place: in order, and in its records
	resume   []int                           // processes whose walk goes on in another chunk
	fallback []int                           // processes to read again with the iterator: their walks did not hold
	closed   map[uint32]struct{}             // processes whose walk ended, and held
	seen     map[uint32]struct{}             // processes with a walk record in the pass being read
	fault    faultAt                         // tests: see injectFault
	pending  func([]byte) error              // takes SYNTH_RECORD_PENDING records
}

// holdBlocks are the memory held records are copied into: fixed
// blocks, reused from dump to dump, so that holding a large dump moves
// no memory around. They own their mappings; Close unmaps them.
type holdBlocks struct {
	blocks [][]byte
	used   int // blocks in use; the last one is being filled
}

// holdBlock is the size of a block of held records.
const holdBlock = 1 << 20

// maxTrailer bounds a sample_id_all trailer: every field of it.
const maxTrailer = 6 * 8

// A record is at most a whole struct synth_mmap2 long, with its trailer.
var _ = [holdBlock - maxRecordBytes - maxTrailer]struct{}{}

// newBlock returns an empty block of holdBlock bytes, mapped and
// populated at once (MAP_POPULATE): filling a block of the Go heap took
// a page fault for every 4 KiB of records, some 3,000 in the first dump
// of 500k VMAs, which made it twice as long as the later ones.
func newBlock() []byte {
	b, err := unix.Mmap(-1, 0, holdBlock, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return make([]byte, 0, holdBlock) // the heap will do
	}
	return b[:0]
}

// Close unmaps the blocks. They are empty after it.
func (hb *holdBlocks) Close() error {
	for _, b := range hb.blocks {
		unix.Munmap(b[:cap(b)]) // EINVAL for a block of the heap: nothing to do
	}
	hb.blocks, hb.used = nil, 0
	return nil
}

// reset empties the blocks, keeping them.
func (hb *holdBlocks) reset() {
	hb.used = 0
	if len(hb.blocks) > 0 {
		hb.blocks[0] = hb.blocks[0][:0]
		hb.used = 1
	}
}

// add copies rec, with the sample_id_all trailer d appends, into the
// last block, or a new one if it does not fit, and returns where it is.
func (hb *holdBlocks) add(d *assemble.Assembler, rec []byte) holdLoc {
	if hb.used == 0 || len(hb.blocks[hb.used-1])+len(rec)+maxTrailer > holdBlock {
		if hb.used == len(hb.blocks) {
			hb.blocks = append(hb.blocks, newBlock())
		}
		hb.blocks[hb.used] = hb.blocks[hb.used][:0]
		hb.used++
	}
	b := &hb.blocks[hb.used-1]
	// The record is kept with its trailer (Trailed), so that writing it
	// out is no further copy.
	off := len(*b)
	*b = d.AppendTrailer(*b, rec)
	return holdLoc{int32(hb.used - 1), uint32(off), uint32(len(*b) - off)}
}

func (hb *holdBlocks) bytes(l holdLoc) []byte { return hb.blocks[l.blk][l.off : l.off+l.n] }

// holdLoc is where a held record is: a block and a range in it.
type holdLoc struct {
	blk    int32
	off, n uint32
}

func newWalkHold() *walkHold {
	return &walkHold{procs: make(map[uint32][]holdLoc), spare: make(map[uint32][]holdLoc),
		closed: make(map[uint32]struct{}), seen: make(map[uint32]struct{})}
}

// reset empties the hold for the dump d, keeping its blocks.
func (h *walkHold) reset(d *assemble.Assembler) {
	h.d, h.cur, h.others, h.curPid = d, nil, nil, 0
	h.resume, h.fallback = h.resume[:0], h.fallback[:0]
	// The lists of the processes of the dump before become the spares;
	// the spares of a process that dump did not hold go.
	clear(h.spare)
	h.procs, h.spare = h.spare, h.procs
	clear(h.closed)
	clear(h.seen)
	h.blocks.reset()
}

// Close releases the blocks; the hold is empty after it.
func (h *walkHold) Close() error {
	clear(h.procs)
	clear(h.spare)
	return h.blocks.Close()
}

func (h *walkHold) bytes(l holdLoc) []byte { return h.blocks.bytes(l) }

// add takes a record of dump_tasks, in emission order.
func (h *walkHold) add(rec []byte) error {
	switch perfdata.RecordView(rec).Type() {
	case perfdata.RecordComm, perfdata.RecordFork, perfdata.RecordNamespaces:
		return h.d.AddTask(rec)
	case perfdata.RecordMmap2:
		h.keep(rec)
	case recordWalk:
		return h.end(rec)
	case recordPending:
		return h.pending(rec)
	}
	return nil
}

func (h *walkHold) keep(rec []byte) {
	if pid := perfdata.RecordView(rec).Pid(); pid != h.curPid || h.cur == nil {
		h.putCur()
		h.curPid, h.cur = pid, h.procs[pid]
		if h.cur == nil {
			h.cur = h.takeSpare(pid)
		}
	}
	h.cur = append(h.cur, h.blocks.add(h.d, rec))
}

// takeSpare returns the emptied list process pid had in the dump before,
// or nil, and takes it out of the spares: no two lists share an array.
func (h *walkHold) takeSpare(pid uint32) []holdLoc {
	l, ok := h.spare[pid]
	if !ok {
		return nil
	}
	delete(h.spare, pid)
	return l[:0]
}

// putCur stores the list of the process whose records keep is adding:
// records come process by process, so the map is written once per run.
func (h *walkHold) putCur() {
	if h.cur != nil {
		h.procs[h.curPid] = h.cur
		h.cur = nil
	}
}

// synthWalk is struct synth_walk; the offsets of its fields after the
// synth_hdr come from the generated layout, as mmap2Next's do.
type synthWalk = synthbpf.SynthSynthWalk

var (
	walkHdr    = unsafe.Offsetof(synthWalk{}.Header)
	walkStatus = int(unsafe.Offsetof(synthWalk{}.Status) - walkHdr)
	walkSize   = int(unsafe.Sizeof(synthWalk{}) - walkHdr)
)

// end takes the record that closes a process's walk, or a chunk of it.
func (h *walkHold) end(rec []byte) error {
	if len(rec) < walkSize {
		return fmt.Errorf("walk record of %d bytes", len(rec))
	}
	pid := perfdata.RecordView(rec).Pid()
	status := hostOrder.Uint32(rec[walkStatus:])
	status, ok := h.fault.walkEnd(pid, status)
	if !ok {
		return nil
	}
	if _, dup := h.seen[pid]; dup {
		// Walked twice in one pass (its leader exited and a thread
		// took it over): neither walk is known to be the whole.
		h.resume = slices.DeleteFunc(h.resume, func(p int) bool { return p == int(pid) })
		delete(h.closed, pid)
		h.discard(pid)
		return nil
	}
	h.seen[pid] = struct{}{}
	switch status {
	case walkDone:
		h.closed[pid] = struct{}{}
	case walkMore:
		h.resume = append(h.resume, int(pid))
		h.d.Stats.Resumed++
	case walkInvalid:
		h.discard(pid)
	default:
		return fmt.Errorf("walk record of pid %d: status %d", pid, status)
	}
	return nil
}

// discard drops what the walk of process pid held, to read the whole
// process again with the iterator.
func (h *walkHold) discard(pid uint32) {
	h.putCur()
	delete(h.procs, pid)
	h.fallback = append(h.fallback, int(pid))
}

// drop forgets what the hold has of process pid.
func (h *walkHold) drop(pid uint32) {
	h.putCur()
	delete(h.procs, pid)
	delete(h.closed, pid)
}

// dropExiting drops what the iterator read of each of pids that is gone
// or exiting now. The kernel's task_vma iterator lets go of a process's
// mmap lock between two reads; a process that exits meanwhile has no mm
// at the next, and the iterator ends it there, as if its VMAs had all
// been read. Such a process is written with its threads and no
// mappings, never with part of them. It returns the processes dropped.
//
// The task asked is the one the iterator read the mappings through, the
// tid of their records: the leader, or, where the leader has exited
// alone and is a zombie while its threads run, the thread that took it
// over (reports_vmas in bpf/record.bpf.h). Asking the zombie leader
// would drop every such process.
func (h *walkHold) dropExiting(pids []int) (dropped []uint32) {
	h.putCur()
	for _, pid := range pids {
		if l, ok := h.procs[uint32(pid)]; ok && exiting(pid, h.reader(pid, l)) {
			h.drop(uint32(pid))
			dropped = append(dropped, uint32(pid))
		}
	}
	return dropped
}

// exiting reports whether process pid, whose mappings were read
// through its task tid, is gone or on its way out: tid is, or the
// leader is (a zombie) and the process is dying, its threads sent
// SIGKILL (procfs.Killed). A leader that exited alone, its threads
// running on, leaves a process that is not.
func exiting(pid, tid int) bool {
	if procfs.Exiting(tid) {
		return true
	}
	return tid != pid && procfs.Exiting(pid) && procfs.Killed(tid)
}

// reader returns the task through which the records l of process pid
// were read: the tid of the first.
func (h *walkHold) reader(pid int, l []holdLoc) int {
	if len(l) == 0 {
		return pid
	}
	return int(perfdata.RecordView(h.bytes(l[0])).Tid())
}

// lastPid is the process of the last record kept.
func (h *walkHold) lastPid() uint32 { return h.curPid }

// unclosed sends to the fallback every process with records held whose
// walk did not end: its last chunk never ran (its resume state was lost)
// or the record that ended it was lost with its batch. What it holds may
// be part of its mappings only. One that has exited meanwhile loses its
// mappings, counted once, as skipped, by the pass that missed it.
func (h *walkHold) unclosed() {
	h.putCur()
	for pid := range h.procs {
		if _, ok := h.closed[pid]; ok {
			continue
		}
		if unix.Kill(int(pid), 0) == unix.ESRCH {
			delete(h.procs, pid)
			continue
		}
		h.discard(pid)
	}
}

// addIter takes a record of the task_vma iterator (dump_vma): run over
// every process with config.WalkIter, or over a process whose maple walk did
// not hold. It keeps the MMAP2 records; the COMM records repeat what the
// task pass wrote.
func (h *walkHold) addIter(rec []byte) error {
	switch perfdata.RecordView(rec).Type() {
	case perfdata.RecordMmap2:
		h.keep(rec)
	case recordPending:
		return h.pending(rec)
	}
	return nil
}

// setBuildIDs rewrites the held MMAP2 records of files whose build ID
// userspace read after the walk into the build-ID form.
func (h *walkHold) setBuildIDs(ids map[fileIdent][]byte) {
	h.putCur()
	if len(ids) == 0 {
		return
	}
	for _, locs := range h.procs {
		for _, l := range locs {
			m := perfdata.Mmap2View(h.bytes(l))
			if m.HasBuildID() {
				continue
			}
			if id, ok := ids[identOf(m)]; ok {
				m.SetBuildID(id)
			}
		}
	}
}

// sortPids fixes the order in which flushSome writes the processes:
// ascending pids, as perf orders them.
func (h *walkHold) sortPids() {
	h.putCur()
	h.order = h.order[:0]
	for pid := range h.procs {
		h.order = append(h.order, pid)
	}
	slices.Sort(h.order)
	h.pi, h.ri = 0, 0
}

// maxOthers bounds the other mappings of a file mappingsOf offers.
const maxOthers = 8

// mappingsOf returns mappings of the file ident names in the held
// records, one per process, up to maxOthers. The first call indexes the
// hold.
func (h *walkHold) mappingsOf(ident fileIdent) []buildid.Mapping {
	if h.others == nil {
		h.putCur()
		h.others = make(map[fileIdent][]buildid.Mapping)
		for pid, locs := range h.procs {
			for _, l := range locs {
				m := perfdata.Mmap2View(h.bytes(l))
				id := identOf(m)
				if m.HasBuildID() || id.ino == 0 {
					continue
				}
				ms := h.others[id]
				if len(ms) < maxOthers && (len(ms) == 0 || ms[len(ms)-1].Pid != int(pid)) {
					h.others[id] = append(ms, buildid.Mapping{Pid: int(pid), Start: m.Addr(), End: m.Addr() + m.Len()})
				}
			}
		}
	}
	return h.others[ident]
}

// flushSome hands held records to the dump, about limit bytes of them (0:
// all), from where the last call stopped. It reports whether all are
// out.
func (h *walkHold) flushSome(limit int) (bool, error) {
	n := 0
	for ; h.pi < len(h.order); h.pi, h.ri = h.pi+1, 0 {
		locs := h.procs[h.order[h.pi]]
		for ; h.ri < len(locs); h.ri++ {
			if limit > 0 && n >= limit {
				return false, nil
			}
			rec := h.bytes(locs[h.ri])
			if err := h.d.AddVMA(rec); err != nil {
				return true, err
			}
			n += len(rec)
		}
	}
	return true, nil
}

// fileIdent is a file as an MMAP2 record of the maj/min/ino form names
// it.
type fileIdent struct {
	maj, min uint32
	ino, gen uint64
}

// identOf is the file of an MMAP2 record of the maj/min/ino form.
func identOf(m perfdata.Mmap2View) fileIdent {
	var id fileIdent
	id.maj, id.min, id.ino, id.gen = m.Inode()
	return id
}

func identOfKey(k *synthbpf.SynthSynthFileKey) fileIdent {
	return fileIdent{maj: k.Dev >> 20, min: k.Dev & (1<<20 - 1), ino: k.Ino, gen: uint64(k.Generation)}
}
