package synth

import (
	"context"
	"maps"
	"slices"
	"sort"

	"github.com/synth-dev/synth/perfdata"
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

// Process is a process of a Table: its name and mappings.
type Process struct {
	Pid      uint32
	Comm     string
	Mappings []Mapping // by address; they do not overlap
}

// Lookup returns the mapping that holds addr.
func (p *Process) Lookup(addr uint64) (*Mapping, bool) {
	i := sort.Search(len(p.Mappings), func(i int) bool { return p.Mappings[i].End > addr })
	if i < len(p.Mappings) && p.Mappings[i].Start <= addr {
		return &p.Mappings[i], true
	}
	return nil, false
}

// Table is the table of processes and mappings a profiler keeps, built
// from a dump (Snapshot) and kept current with the live stream of a
// Session (Apply). It is not safe for concurrent use.
type Table struct {
	procs map[uint32]*Process
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{procs: map[uint32]*Process{}} }

// Snapshot runs one dump of m and returns the table of what it read.
func Snapshot(ctx context.Context, m *Method) (*Table, Stats, error) {
	t := NewTable()
	st, err := m.Dump(ctx, func(rec []byte) error {
		t.Apply(rec)
		return nil
	})
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

// Apply updates the table with a record of a dump or of a session's
// stream (its trailer, if any, is not read):
//   - MMAP2 and MMAP add a mapping, in place of what it overlaps;
//   - COMM names the process, and with PERF_RECORD_MISC_COMM_EXEC (an
//     exec) drops its mappings: the new program's follow;
//   - FORK of a new process gives it a copy of its parent's mappings
//     (not a dump's, which only names a running process's parent);
//   - EXIT of a process's main thread removes it.
//
// Other records, and the kernel's maps, are left alone. A malformed
// record is an error, and changes nothing.
func (t *Table) Apply(rec []byte) error {
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
