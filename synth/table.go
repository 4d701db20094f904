package synth

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"

	"github.com/synth-dev/synth/perfdata"
	"golang.org/x/sys/unix"
)

// Mapping is one mapping of a process, as an MMAP2 record reports it.
type Mapping struct {
	Start, End uint64 // [Start, End)
	Pgoff      uint64 // offset in the file, in bytes
	// The file: its build ID when the record carried one (BuildID not
	// nil), else its device and inode.
	BuildID  []byte
	Maj, Min uint32
	Ino      uint64
	Prot     uint32 // PROT_*
	Flags    uint32 // MAP_*
	Path     string // "//anon" for anonymous memory, "[vdso]" and the like
}

// Process is a process of a Table: its name and mappings. A *Process
// stays this process's until the table removes it; Apply changes its
// fields in place, and its Mappings slice, whose elements a later Apply
// may overwrite with other mappings: a caller that keeps a mapping
// copies it, or asks Table.Resolve, whose answer is its own.
type Process struct {
	Pid      uint32
	Comm     string
	Mappings []Mapping // by address; they do not overlap
}

// Lookup returns the mapping that holds addr: a pointer into
// p.Mappings, valid until the table's next Apply (see Process).
func (p *Process) Lookup(addr uint64) (*Mapping, bool) {
	i := sort.Search(len(p.Mappings), func(i int) bool { return p.Mappings[i].End > addr })
	if i < len(p.Mappings) && p.Mappings[i].Start <= addr {
		return &p.Mappings[i], true
	}
	return nil, false
}

// Table is the table of processes and mappings a profiler keeps, built
// from a dump (Snapshot) and kept current with the stream of a Session
// (Apply). At the end of each dump it holds what the kernel had: perf's
// records report no unmapping, but a dump reports every mapping, so each
// dump's records replace what the table held of the processes it read,
// and the live records after them bring it up to date (see Apply).
// Between dumps a range unmapped goes at once where the Session reports
// unmaps (SessionOptions.Unmaps, UnmapsErr); elsewhere it stays until the
// next dump (or until a mapping replaces it, or its process execs or
// exits). A process leaves the table at the EXIT of its main thread, and
// no dump brings it back: the BPF method's dumps leave out tasks that
// are exiting and the threads of a process that is, so a zombie, which
// /proc lists until its parent reaps it, is not a process of the table. It is not safe for concurrent use.
type Table struct {
	procs map[uint32]*Process
	// read are the processes the dump under way has read, gen its
	// generation.
	read map[uint32]bool
	gen  uint64
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{procs: map[uint32]*Process{}, read: map[uint32]bool{}} }

// Snapshot runs one dump of m and returns the table of what it read.
func Snapshot(ctx context.Context, m *Method) (*Table, Stats, error) {
	t := NewTable()
	rec := Record{Kind: KindSynthesized}
	st, err := m.Dump(ctx, func(raw []byte) error {
		rec.Raw = raw
		return t.Apply(&rec)
	})
	if err == nil {
		err = t.Apply(&Record{Kind: KindDumpEnd, Partial: m.partial || st.Lost > 0})
	}
	return t, st, err
}

// Process returns the process pid.
func (t *Table) Process(pid uint32) (*Process, bool) {
	p, ok := t.procs[pid]
	return p, ok
}

// Processes returns every process, by pid.
func (t *Table) Processes() []*Process {
	pids := slices.Sorted(maps.Keys(t.procs))
	ps := make([]*Process, len(pids))
	for i, pid := range pids {
		ps[i] = t.procs[pid]
	}
	return ps
}

// Apply updates the table with a record of a Session's stream, or of a
// Method's dump given as KindSynthesized records and a KindDumpEnd:
//   - the first record of a dump about a process drops what the table
//     held of it: the dump's records of it are the whole of it;
//   - a KindDumpEnd of a dump of every process (not Partial: it lost no
//     record) removes the processes the dump did not read: they exited,
//     whether or not their EXIT reached the stream;
//   - a live record the last dump read over (Superseded) is skipped: it
//     would bring back what the dump found gone (or, a KindUnmap, take
//     away what the dump found mapped again);
//   - a KindUnmap removes its range from the process's mappings, and
//     after an mremap puts the mapping that held its start where the
//     call put it; one of a range no longer executable (NoExec) removes
//     it from the executable mappings only;
//   - samples are skipped.
//
// The records themselves (their trailer, if any, is not read):
//   - MMAP2 and MMAP add a mapping, in place of what it overlaps;
//   - COMM names the process, and with PERF_RECORD_MISC_COMM_EXEC (an
//     exec) drops its mappings: the new program's follow;
//   - FORK of a new process gives it a copy of its parent's mappings
//     (not a dump's, which only names a running process's parent);
//   - EXIT of a process's main thread removes it. The BPF method's
//     dumps read no task of an exiting process, so no dump's read of
//     the process supersedes that EXIT, nor does a dump that did not
//     read it (its end removed the process already): only a read of its
//     pid after it, a new process's, does; and a zombie does not come
//     back (DESIGN.md, "The live side-band").
//
// Other records, and the kernel's maps, are left alone. A malformed
// record is an error, and changes nothing.
func (t *Table) Apply(r *Record) error {
	switch r.Kind {
	case KindSample:
		return nil
	case KindDumpEnd:
		if !r.Partial {
			for pid := range t.procs {
				if !t.read[pid] {
					delete(t.procs, pid)
				}
			}
		}
		clear(t.read)
		return nil
	case KindUnmap:
		u, ok := r.Unmapped()
		if !ok {
			return errors.New("malformed unmap record")
		}
		if !r.Superseded {
			t.unmap(u)
		}
		return nil
	case KindLive:
		if r.Superseded {
			return nil
		}
	case KindSynthesized:
		t.dumpRead(r)
	}
	return t.apply(r.Raw)
}

// dumpRead notes that the dump of a synthesized record read its
// process, and on the first record of it drops what the table held.
func (t *Table) dumpRead(r *Record) {
	if r.Gen != t.gen {
		clear(t.read) // a dump whose end never came
		t.gen = r.Gen
	}
	v := perfdata.RecordView(r.Raw)
	if len(r.Raw) < 16 {
		return
	}
	switch v.Type() {
	case perfdata.RecordMmap, perfdata.RecordMmap2, perfdata.RecordComm, perfdata.RecordFork, perfdata.RecordNamespaces:
	default:
		return
	}
	pid := v.Pid()
	if v.Type() == perfdata.RecordMmap && v.Misc()&perfdata.MiscKernel != 0 || t.read[pid] {
		return
	}
	t.read[pid] = true
	if p, ok := t.procs[pid]; ok {
		p.Mappings = p.Mappings[:0]
	}
}

func (t *Table) apply(rec []byte) error {
	h, err := perfdata.ParseHeader(rec)
	if err != nil {
		return err
	}
	switch h.Type {
	case perfdata.RecordMmap2:
		m, _, err := perfdata.ParseMmap2(rec, 0)
		if err != nil {
			return err
		}
		t.add(m.Pid, Mapping{Start: m.Addr, End: m.Addr + m.Len, Pgoff: m.Pgoff, BuildID: m.BuildID,
			Maj: m.Maj, Min: m.Min, Ino: m.Ino, Prot: m.Prot, Flags: m.Flags, Path: m.Filename})
	case perfdata.RecordMmap:
		m, _, err := perfdata.ParseMmap(rec, 0)
		if err != nil {
			return err
		}
		if h.Misc&perfdata.MiscKernel == 0 {
			t.add(m.Pid, Mapping{Start: m.Addr, End: m.Addr + m.Len, Pgoff: m.Pgoff, Path: m.Filename})
		}
	case perfdata.RecordComm:
		c, _, err := perfdata.ParseComm(rec, 0)
		if err != nil {
			return err
		}
		if c.Pid == c.Tid || h.Misc&perfdata.MiscCommExec != 0 {
			p := t.proc(c.Pid)
			p.Comm = c.Comm
			if h.Misc&perfdata.MiscCommExec != 0 {
				p.Mappings = nil
			}
		}
	case perfdata.RecordFork:
		f, _, err := perfdata.ParseFork(rec, 0)
		if err != nil {
			return err
		}
		// A dump's FORK (perf's MiscForkExec) only names the parent of a
		// running process, whose own mappings follow.
		if _, ok := t.procs[f.Pid]; f.Pid != f.Ppid && f.Pid == f.Tid && !ok && h.Misc&perfdata.MiscForkExec == 0 {
			p := t.proc(f.Pid)
			if parent, ok := t.procs[f.Ppid]; ok {
				p.Comm, p.Mappings = parent.Comm, slices.Clone(parent.Mappings)
			}
		}
	case perfdata.RecordExit:
		e, _, err := perfdata.ParseExit(rec, 0)
		if err != nil {
			return err
		}
		if e.Pid == e.Tid {
			delete(t.procs, e.Pid)
		}
	}
	return nil
}

func (t *Table) proc(pid uint32) *Process {
	p, ok := t.procs[pid]
	if !ok {
		p = &Process{Pid: pid}
		t.procs[pid] = p
	}
	return p
}

// unmap applies a KindUnmap's range and, after an mremap, its new place.
func (t *Table) unmap(u Unmap) {
	p, ok := t.procs[u.Pid]
	if !ok {
		return
	}
	if u.NoExec {
		p.Mappings = cutExec(p.Mappings, u.Start, u.End)
		return
	}
	m, held := p.Lookup(u.Start)
	var moved Mapping
	if held {
		moved = *m
	}
	p.Mappings = cut(p.Mappings, u.Start, u.End)
	if held && u.To < u.ToEnd {
		moved.Pgoff += u.Start - moved.Start
		moved.Start, moved.End = u.To, u.ToEnd
		t.add(u.Pid, moved)
	}
}

// cutExec removes [start, end) from the executable mappings of ms,
// leaving the others: a range that is no longer executable, whose new
// mapping the kernel reported if the table holds data mappings too.
func cutExec(ms []Mapping, start, end uint64) []Mapping {
	for i := 0; i < len(ms); i++ {
		m := ms[i]
		if m.End <= start || m.Start >= end || m.Prot&unix.PROT_EXEC == 0 {
			continue
		}
		before := len(ms)
		ms = cut(ms, max(start, m.Start), min(end, m.End))
		i += len(ms) - before // past what the cut left of m
	}
	return ms
}

// cut removes [start, end) from ms, by address, trimming the mappings
// it overlaps in part.
func cut(ms []Mapping, start, end uint64) []Mapping {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].End > start })
	j := sort.Search(len(ms), func(i int) bool { return ms[i].Start >= end })
	if i >= j || end <= start {
		return ms
	}
	repl := make([]Mapping, 0, 2)
	if head := ms[i]; head.Start < start {
		head.End = start
		repl = append(repl, head)
	}
	if tail := ms[j-1]; tail.End > end {
		tail.Pgoff += end - tail.Start
		tail.Start = end
		repl = append(repl, tail)
	}
	return slices.Replace(ms, i, j, repl...)
}

// add inserts m into pid's mappings, cutting what it overlaps, as a
// MAP_FIXED mapping replaces the pages under it.
func (t *Table) add(pid uint32, m Mapping) {
	if m.End <= m.Start {
		return
	}
	p := t.proc(pid)
	ms := p.Mappings
	if n := len(ms); n == 0 || ms[n-1].End <= m.Start {
		p.Mappings = append(ms, m) // a dump's records come by address
		return
	}
	// ms[i:j] overlap m; the first may start before it, the last end
	// after it.
	i := sort.Search(len(ms), func(i int) bool { return ms[i].End > m.Start })
	j := sort.Search(len(ms), func(i int) bool { return ms[i].Start >= m.End })
	repl := make([]Mapping, 0, 3)
	if i < j && ms[i].Start < m.Start {
		head := ms[i]
		head.End = m.Start
		repl = append(repl, head)
	}
	repl = append(repl, m)
	if i < j && ms[j-1].End > m.End {
		tail := ms[j-1]
		tail.Pgoff += m.End - tail.Start
		tail.Start = m.End
		repl = append(repl, tail)
	}
	p.Mappings = slices.Replace(ms, i, j, repl...)
}
