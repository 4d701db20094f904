package procmethod

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// mapReader reads the mappings of one process at a time. Each worker of
// a dump has its own, with its buffers and caches, made for the dump.
type mapReader interface {
	// read calls fn with each mapping of process pid, by address, and
	// returns why it stopped early, if it did. Without Options.Data it
	// reports executable mappings only. mp is valid until fn returns.
	read(pid int, fn func(mp *procfs.Mapping)) error
}

// Method synthesizes records from /proc, one process per task of a
// pool of workers, and writes them in perf's order. Procmaps and
// Procquery differ only in how they read a process's mappings.
type Method struct {
	name    config.MethodName
	opts    config.Resolved
	threads int
	reader  func(o *config.Resolved) mapReader // a reader for a worker of one dump with o
	kernel  assemble.Kernel
	ids     *procIDs // build IDs read from the files; nil: none
}

func newProcMethod(name config.MethodName, opts config.Resolved, threads int, reader func(*config.Resolved) mapReader) (*Method, error) {
	if threads <= 0 {
		threads = 1
	}
	m := &Method{name: name, opts: opts, threads: threads, reader: reader}
	if !opts.NoKernel {
		k, err := assemble.ReadKallsyms("/proc/kallsyms")
		if err != nil {
			return nil, err
		}
		m.kernel = k
	}
	return m, nil
}

// SetOptions changes what the next dumps read and write: the
// processes, and every option but those the method took when it opened
// (see config.Resolved.WithLoaded). It returns the options the dumps
// now use. Not while a dump runs.
func (m *Method) SetOptions(o config.Resolved) config.Resolved {
	m.opts = o.WithLoaded(m.opts)
	return m.opts
}

// procResult is what a worker made of one process.
type procResult struct {
	recs                 []byte
	threads, maps, files int
	buildIDs             int
	gone                 bool
	unreadable           bool // its mappings were not ours to read
	lockedOut            bool // its mappings were not read in time
	pid                  int
	src                  int     // the task whose mappings were read: pid, or a thread of a zombie leader
	w                    *worker // the worker reading it
}

// Dump synthesizes the host (or config.Resolved.Pids) and hands each record to
// emit in perf's order: kernel maps, then per process COMM/FORK and MMAP2.
// A process's records may be emitted from a worker's goroutine, never two
// calls at once, and all before Dump returns.
func (m *Method) Dump(ctx context.Context, emit func(rec []byte) error) (config.Stats, error) {
	d := assemble.New(m.opts, emit, nil)
	d.Stats.Method = m.name
	if m.ids != nil {
		m.ids.begin()
	}
	start := time.Now()
	if err := d.KernelMaps(m.kernel); err != nil {
		return d.Stats, err
	}
	if err := d.BPFPrograms(); err != nil {
		return d.Stats, err
	}
	if err := d.Cgroups(); err != nil {
		return d.Stats, err
	}
	d.Stats.Steps = assemble.Time(d.Stats.Steps, "kernel maps", start)
	start = time.Now()
	pids := m.opts.Pids
	if len(pids) == 0 {
		var err error
		if pids, err = procfs.Pids(); err != nil {
			return d.Stats, err
		}
	}
	err := m.run(ctx, pids, d.WantThread, func(r *procResult) error {
		if r.gone {
			d.Stats.Skipped++
			return nil
		}
		d.Stats.Processes++
		if r.unreadable {
			d.Stats.Unreadable++
		}
		if r.lockedOut {
			d.LockedOut(r.pid)
		}
		d.Stats.Threads += r.threads
		d.Stats.Mappings += r.maps
		d.Stats.FileMappings += r.files
		d.Stats.BuildIDMappings += r.buildIDs
		for rec, err := range perfdata.Records(r.recs) {
			if err != nil {
				return fmt.Errorf("pid %d: %w", r.pid, err)
			}
			d.Stats.Records++
			if err := d.Emit(rec); err != nil {
				return err
			}
		}
		putRecs(r.recs)
		return nil
	})
	if m.ids != nil {
		m.ids.end(&d.Stats)
	}
	d.Stats.Steps = assemble.Time(d.Stats.Steps, "processes", start)
	return d.FinishStats(), err
}

// run reads the processes with the worker pool and hands the results to
// write in pid order.
func (m *Method) run(ctx context.Context, pids []int, want func(uint32) bool, write func(*procResult) error) error {
	late := &bound[*procResult]{after: m.opts.ProcMapWait(), late: func(i int) *procResult {
		return m.lockedOut(pids[i], want)
	}}
	reader := func() mapReader { return m.reader(&m.opts) }
	return runOrdered(ctx, len(pids), m.threads, reader,
		func(rd mapReader, w *worker, i int) *procResult { return m.process(rd, w, pids[i], want) }, write, late)
}

// lockedOut is the result of a process whose mappings were not read in
// time (the read of its maps waits for its mmap lock): its threads.
func (m *Method) lockedOut(pid int, want func(uint32) bool) *procResult {
	r := &procResult{pid: pid, lockedOut: true}
	comms, err := procfs.ReadComms(pid)
	if err != nil {
		r.gone = true
		return r
	}
	r.recs = m.taskRecords(getRecs(), pid, comms, m.opts.SampleTypeOrDefault(), want)
	r.threads = len(comms)
	return r
}

// process synthesizes one process: FORK, NAMESPACES (with
// Options.Namespaces) and COMM for each thread, then MMAP2 for its
// mappings. A process that is gone comes back marked gone.
func (m *Method) process(rd mapReader, w *worker, pid int, want func(uint32) bool) *procResult {
	r := &procResult{pid: pid, w: w}
	st := m.opts.SampleTypeOrDefault()
	comms, err := procfs.ReadComms(pid)
	if err != nil {
		r.gone = true
		return r
	}
	r.recs = m.taskRecords(getRecs(), pid, comms, st, want)
	r.threads = len(comms)
	// The process exists (its comms were read): a kernel thread has no
	// maps, /proc/1/maps may be unreadable, and a process exiting now
	// loses them. Its threads are reported either way.
	r.src = pid
	err = rd.read(pid, func(mp *procfs.Mapping) { r.recs = m.mmap2(r, mp, uint32(pid), st) })
	if r.maps == 0 && len(comms) > 1 { // PROCMAP_QUERY of a leader without mm: ESRCH
		if tid, ok := liveThread(pid, comms); ok {
			r.src = tid
			err = rd.read(tid, func(mp *procfs.Mapping) { r.recs = m.mmap2(r, mp, uint32(pid), st) })
		}
	}
	r.unreadable = errors.Is(err, fs.ErrPermission)
	return r
}

// liveThread returns a thread of process pid, not its leader, that can
// show the process's mappings when the leader cannot: a leader that has
// exited (exit(2), not exit_group(2)) is a zombie until its last thread
// exits, its mm let go, and /proc/PID/maps is empty, while the threads
// run in the process's mappings. perf reads the leader's maps and
// resolves none of their samples; the BPF method reads the mappings
// through such a thread too. /proc/TID/maps is the thread's.
func liveThread(pid int, comms map[int]string) (int, bool) {
	if !procfs.Exiting(pid) {
		return 0, false
	}
	for _, tid := range leaderFirst(pid, comms) {
		if tid != pid && !procfs.Exiting(tid) {
			return tid, true
		}
	}
	return 0, false
}

// recPool holds the record buffers of processes already written.
var recPool = sync.Pool{New: func() any { return new([]byte) }}

func getRecs() []byte { return (*recPool.Get().(*[]byte))[:0] }

func putRecs(b []byte) { recPool.Put(&b) }

// taskRecords appends the thread records of process pid: FORK,
// NAMESPACES and COMM, as perf synthesizes them from /proc. The leader's
// FORK names its parent process; another thread's its leader.
func (m *Method) taskRecords(b []byte, pid int, comms map[int]string, st uint64, want func(uint32) bool) []byte {
	p, ppid := uint32(pid), uint32(pid)
	if s, err := procfs.Status(pid); err == nil {
		ppid = uint32(s.PPid)
	}
	for _, tid := range leaderFirst(pid, comms) {
		t := uint32(tid)
		if !want(t) {
			continue
		}
		sid := &perfdata.SampleID{Pid: p, Tid: t}
		f := perfdata.Fork{Misc: perfdata.MiscForkExec, Pid: p, Ppid: p, Tid: t, Ptid: p}
		if tid == pid {
			f.Ppid, f.Ptid = ppid, ppid
		}
		b = f.Append(b, st, sid)
		if m.opts.Namespaces {
			ns := perfdata.Namespaces{Pid: p, Tid: t, Links: make([]perfdata.NSLink, perfdata.NumNS)}
			for i, l := range procfs.Namespaces(pid, tid) {
				ns.Links[i] = perfdata.NSLink(l)
			}
			b = ns.Append(b, st, sid)
		}
		c := perfdata.Comm{Pid: p, Tid: t, Comm: comms[tid]}
		b = c.Append(b, st, sid)
	}
	return b
}

// leaderFirst returns the tids of comms, the leader pid's first, then
// the others ascending. Once pids wrap a thread's tid can be below its
// leader's, and perf gives a thread whose FORK comes before its leader's
// maps that the leader's MMAP2s never reach (see assemble's writeGroup).
func leaderFirst(pid int, comms map[int]string) []int {
	tids := make([]int, 0, len(comms))
	for tid := range comms {
		if tid != pid {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	if _, ok := comms[pid]; ok {
		tids = slices.Insert(tids, 0, pid)
	}
	return tids
}

// mmap2 appends the MMAP2 record of one mapping, as perf synthesizes it
// from /proc: anonymous mappings named //anon, page offset as /proc shows.
func (m *Method) mmap2(r *procResult, mp *procfs.Mapping, pid uint32, st uint64) []byte {
	rec := perfdata.Mmap2{
		Misc: perfdata.MiscUser, Pid: pid, Tid: pid,
		Addr: mp.Start, Len: mp.End - mp.Start, Pgoff: mp.Pgoff,
		Maj: mp.Maj, Min: mp.Min, Ino: mp.Ino,
		Prot: mp.Prot, Flags: mp.Flags(), Filename: mp.Path,
	}
	if mp.Prot&unix.PROT_EXEC == 0 {
		rec.Misc |= perfdata.MiscMmapData
	}
	if rec.Filename == "" {
		rec.Filename = "//anon"
	}
	if mp.Ino != 0 {
		r.files++
		if m.ids != nil && !m.opts.NoBuildID {
			rec.BuildID = m.ids.of(r.src, mp, r.w)
		}
	}
	if rec.BuildID != nil {
		r.buildIDs++
	}
	r.maps++
	return rec.Append(r.recs, st, &perfdata.SampleID{Pid: pid, Tid: pid})
}

// Close ends the helper process of the build-ID reads, if any.
func (m *Method) Close() error {
	if m.ids != nil {
		return m.ids.reader.Close()
	}
	return nil
}

// pidPath is the path of a file of process pid in /proc.
func pidPath(pid int, name string) string {
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}
