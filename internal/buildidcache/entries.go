package buildidcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/synth-dev/synth/perfdata"
)

// The names perf gives the kernel and the vDSO in HEADER_BUILD_ID.
const (
	KernelName = "[kernel.kallsyms]"
	VDSOName   = "[vdso]"
)

// Entry is a file of a recording to put in the cache.
type Entry struct {
	Name    string // as the build-ID table names it: a path, KernelName or VDSOName
	BuildID []byte
	// Pid is a process that mapped the file, with the mapping's
	// bounds, so that Add can read the file as that process sees it;
	// 0 when the recording has no mapping of it.
	Pid        uint32
	Start, End uint64
}

// cpumodes of a record's misc (PERF_RECORD_MISC_CPUMODE_MASK).
const (
	cpumodeMask   = 7
	cpumodeKernel = 1
	cpumodeUser   = 2
)

// mapping is a file mapping of a process.
type mapping struct {
	start, end uint64
	name       string
}

// hit is the first mapping a sample was found in, for a file.
type hit struct {
	pid        uint32
	start, end uint64
}

// EntriesFile is Entries on the perf.data at path.
func EntriesFile(path string, all bool) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	r, err := perfdata.NewReader(f, st.Size())
	if err != nil {
		return nil, err
	}
	return Entries(r, all)
}

// Entries reads the records of r and returns the host's entries of its
// build-ID table (the HEADER_BUILD_ID feature of a file, the
// HEADER_BUILD_ID records of a pipe) that some sample fell into, in
// table order; with all, every one of them. An entry of the kernel
// counts as hit by any kernel sample; the vDSO's is always taken, as
// perf 6.1 caches it from a recording without samples in it; modules
// and guests are left out.
func Entries(r *perfdata.Reader, all bool) ([]Entry, error) {
	var table []perfdata.BuildIDEvent
	for _, f := range r.Features() {
		if f.ID == perfdata.FeatBuildID {
			evs, err := splitBuildIDs(f.Data)
			if err != nil {
				return nil, err
			}
			table = append(table, evs...)
		}
	}
	maps := map[uint32][]mapping{}
	hits := map[string]hit{} // by file name
	kernel := false
	byID := map[uint64]*perfdata.Attr{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		st := r.SampleType()
		switch rec.Type {
		case perfdata.RecordHeaderBuildID:
			if ev, err := perfdata.ParseBuildIDEvent(rec.Data); err == nil {
				table = append(table, ev)
			}
		case perfdata.RecordMmap:
			if m, _, err := perfdata.ParseMmap(rec.Data, st); err == nil && rec.Misc&cpumodeMask == cpumodeUser {
				maps[m.Pid] = append(maps[m.Pid], mapping{m.Addr, m.Addr + m.Len, m.Filename})
			}
		case perfdata.RecordMmap2:
			if m, _, err := perfdata.ParseMmap2(rec.Data, st); err == nil && rec.Misc&cpumodeMask == cpumodeUser {
				maps[m.Pid] = append(maps[m.Pid], mapping{m.Addr, m.Addr + m.Len, m.Filename})
			}
		case perfdata.RecordComm:
			if rec.Misc&perfdata.MiscCommExec != 0 {
				if c, _, err := perfdata.ParseComm(rec.Data, st); err == nil && c.Pid == c.Tid {
					delete(maps, c.Pid) // a new image: its mappings follow
				}
			}
		case perfdata.RecordFork:
			if f, _, err := perfdata.ParseFork(rec.Data, st); err == nil && f.Pid != f.Ppid {
				if _, ok := maps[f.Pid]; !ok {
					maps[f.Pid] = slices.Clone(maps[f.Ppid])
				}
			}
		case perfdata.RecordSample:
			a := sampleAttr(r.Attrs(), byID, rec.Data)
			if a == nil {
				continue
			}
			s, err := perfdata.ParseSample(rec.Data, a)
			if err != nil {
				continue
			}
			switch rec.Misc & cpumodeMask {
			case cpumodeKernel:
				kernel = true
			case cpumodeUser:
				ms := maps[s.Pid]
				for i := len(ms) - 1; i >= 0; i-- { // the newest mapping wins
					if m := ms[i]; s.IP >= m.start && s.IP < m.end {
						if _, ok := hits[m.name]; !ok {
							hits[m.name] = hit{s.Pid, m.start, m.end}
						}
						break
					}
				}
			}
		}
	}
	var out []Entry
	for _, ev := range table {
		if ev.Pid != -1 || len(ev.BuildID) == 0 {
			continue // a guest's
		}
		e := Entry{Name: ev.Filename, BuildID: ev.BuildID}
		h, ok := hits[ev.Filename]
		if ok {
			e.Pid, e.Start, e.End = h.pid, h.start, h.end
		}
		switch {
		case ev.Misc&cpumodeMask == cpumodeKernel:
			if ev.Filename != KernelName {
				continue // a module
			}
			ok = kernel
		case ev.Filename == VDSOName:
			ok = true // perf record caches it with or without samples in it
		}
		if ok || all {
			out = append(out, e)
		}
	}
	return out, nil
}

// sampleAttr returns the attr of a sample: the only one, or the one
// whose id the sample's identifier names.
func sampleAttr(attrs []perfdata.EventAttr, byID map[uint64]*perfdata.Attr, rec []byte) *perfdata.Attr {
	switch {
	case len(attrs) == 0:
		return nil
	case len(attrs) == 1:
		return &attrs[0].Attr
	case attrs[0].Attr.SampleType&perfdata.SampleIdentifier == 0:
		return &attrs[0].Attr // perf needs the identifier to tell them apart; they share a layout
	}
	if len(byID) == 0 {
		for i := range attrs {
			for _, id := range attrs[i].IDs {
				byID[id] = &attrs[i].Attr
			}
		}
	}
	id, ok := perfdata.SampleView(rec).Identifier()
	if !ok {
		return nil
	}
	return byID[id]
}

// splitBuildIDs splits a HEADER_BUILD_ID section into its events.
func splitBuildIDs(b []byte) ([]perfdata.BuildIDEvent, error) {
	var evs []perfdata.BuildIDEvent
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, fmt.Errorf("HEADER_BUILD_ID: %d trailing bytes", len(b))
		}
		n := int(binary.LittleEndian.Uint16(b[6:]))
		if n < 8 || n > len(b) {
			return nil, fmt.Errorf("HEADER_BUILD_ID: entry size %d", n)
		}
		if ev, err := perfdata.ParseBuildIDEvent(b[:n]); err == nil {
			evs = append(evs, ev)
		}
		b = b[n:]
	}
	return evs, nil
}
