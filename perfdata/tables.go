package perfdata

import (
	"cmp"
	"slices"
)

// Tables are what a perf.data header keeps about the objects its
// records name, as perf record collects them from the records it
// writes: the build IDs of the kernel, its modules and the files mapped
// (HEADER_BUILD_ID), and the BPF programs loaded, with their BTF
// (HEADER_BPF_PROG_INFO, HEADER_BPF_BTF). Writer.WriteTables writes them.
type Tables struct {
	BuildIDs []BuildIDEvent
	BPFProgs []BPFProg // ids ascending
	BTFs     []BTF     // ids ascending
}

// BPFProg is one program of HEADER_BPF_PROG_INFO: its id, and its entry
// as perf's struct perf_bpil lays it out (tools/perf/util/bpf-utils.h).
type BPFProg struct {
	ID   uint32
	Info []byte
}

// Merge adds the entries of o that t does not have: a build ID by its
// file name, kind and pid, a program or BTF object by its id.
func (t *Tables) Merge(o Tables) {
	type idKey struct {
		misc uint16
		pid  int32
		name string
	}
	have := make(map[idKey]struct{}, len(t.BuildIDs))
	for _, e := range t.BuildIDs {
		have[idKey{e.Misc, e.Pid, e.Filename}] = struct{}{}
	}
	for _, e := range o.BuildIDs {
		if _, ok := have[idKey{e.Misc, e.Pid, e.Filename}]; !ok {
			t.BuildIDs = append(t.BuildIDs, e)
		}
	}
	t.BPFProgs = mergeByID(t.BPFProgs, o.BPFProgs, func(p BPFProg) uint32 { return p.ID })
	t.BTFs = mergeByID(t.BTFs, o.BTFs, func(b BTF) uint32 { return b.ID })
}

// mergeByID returns a with the elements of b whose id it lacks, in id
// order.
func mergeByID[T any](a, b []T, id func(T) uint32) []T {
	if len(b) == 0 {
		return a
	}
	for _, x := range b {
		if !slices.ContainsFunc(a, func(y T) bool { return id(y) == id(x) }) {
			a = append(a, x)
		}
	}
	slices.SortFunc(a, func(x, y T) int { return cmp.Compare(id(x), id(y)) })
	return a
}

// BPFFeatures returns the HEADER_BPF_PROG_INFO and HEADER_BPF_BTF
// sections of the tables (see BPFFeatures).
func (t *Tables) BPFFeatures() []Feature {
	progs := make([][]byte, len(t.BPFProgs))
	for i, p := range t.BPFProgs {
		progs[i] = p.Info
	}
	return BPFFeatures(progs, t.BTFs)
}

// WriteTables writes t: its build IDs as WriteBuildIDs does, and in
// file mode its BPF sections, which Close writes. In pipe mode the BPF
// sections went out with the header, before the records, as perf
// writes them; they are left as they were.
func (w *Writer) WriteTables(t Tables) error {
	if err := w.WriteBuildIDs(t.BuildIDs); err != nil {
		return err
	}
	if w.pipe {
		return nil
	}
	for _, f := range t.BPFFeatures() {
		if err := w.AddFeature(f); err != nil {
			return err
		}
	}
	return nil
}
