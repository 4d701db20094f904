package synth

import (
	"bytes"
	"slices"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/perfdata"
)

// headerTables collect, from the records written, what perf.data keeps
// in its header: the build IDs of the files and the BPF programs.
type headerTables struct {
	buildIDs buildIDTable
	bpf      bpfInfo
	// host brings the host's features of a file-mode header, read while
	// the records are written (see newPerfWriter); nil in pipe mode.
	host <-chan []perfdata.Feature
}

func (h *headerTables) add(rec []byte) {
	h.buildIDs.add(rec)
	h.bpf.add(rec)
}

// buildIDTable collects the DSOs of a dump's MMAP2 records that carry a
// build ID, for the HEADER_BUILD_ID section (file mode) or records (pipe
// mode) that `perf buildid-list` and perf's symbolization read.
type buildIDTable struct {
	ids map[string][]byte // file name -> build ID
	// last is the name of the record before, already in ids: a dump
	// writes a file's mappings one after another, and comparing with
	// the last name is cheaper than finding its end and hashing it.
	last []byte
	vdso bool // a [vdso] mapping was added
	// modules are the kernel module maps added: map name and module
	// name, in map order.
	modules [][2]string
}

// sysModule is where the kernel shows the loaded modules' notes.
const sysModule = "/sys/module"

// vdsoName is the name of the vDSO's mappings, and perf's for its DSO.
const vdsoName = "[vdso]"

func (t *buildIDTable) add(rec []byte) {
	r := perfdata.RecordView(rec)
	if r.Type() == perfdata.RecordMmap && r.Misc()&perfdata.MiscKernel != 0 {
		t.addKernelMap(rec)
		return
	}
	if r.Type() != perfdata.RecordMmap2 {
		return
	}
	m := perfdata.Mmap2View(rec)
	if !t.vdso && string(m.Filename()) == vdsoName {
		t.vdso = true // until then only: the vDSO has no build ID
	}
	if !m.HasBuildID() {
		return
	}
	name := m.Filename()
	if bytes.Equal(name, t.last) {
		return
	}
	if t.ids == nil {
		t.ids = make(map[string][]byte)
	}
	// The lookup converts without allocating; only a new name is copied.
	if _, ok := t.ids[string(name)]; !ok {
		t.ids[string(name)] = slices.Clone(m.BuildID())
	}
	t.last = append(t.last[:0], name...)
}

// addKernelMap notes a module's map.
func (t *buildIDTable) addKernelMap(rec []byte) {
	m, _, err := perfdata.ParseMmap(rec, 0) // the name ends at its NUL, before the trailer
	if err != nil {
		return
	}
	if mod, ok := assemble.ModuleName(m.Filename); ok {
		t.modules = append(t.modules, [2]string{m.Filename, mod})
	}
}

// events returns the table as build-ID events: the kernel's (from
// /sys/kernel/notes) unless noKernel, then its modules' (from
// /sys/module), in map order, as misc KERNEL; then the files sorted by
// name, and the 64-bit vDSO's as [vdso] when a mapping of it was dumped,
// as perf lists them.
func (t *buildIDTable) events(noKernel bool) []perfdata.BuildIDEvent {
	var evs []perfdata.BuildIDEvent
	if id := buildid.Kernel(); id != nil && !noKernel {
		evs = append(evs, perfdata.BuildIDEvent{Misc: perfdata.MiscKernel, Pid: -1,
			BuildID: id, Filename: "[kernel.kallsyms]"})
	}
	evs = append(evs, t.moduleEvents(sysModule)...)
	names := make([]string, 0, len(t.ids))
	for name := range t.ids {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		evs = append(evs, perfdata.BuildIDEvent{Misc: perfdata.MiscUser, Pid: -1,
			BuildID: t.ids[name], Filename: name})
	}
	if t.vdso {
		if id := buildid.VDSO(); id != nil {
			evs = append(evs, perfdata.BuildIDEvent{Misc: perfdata.MiscUser, Pid: -1,
				BuildID: id, Filename: vdsoName})
		}
	}
	return evs
}

// moduleEvents returns the build IDs of the modules' maps, read from
// sysModule.
func (t *buildIDTable) moduleEvents(sysModule string) []perfdata.BuildIDEvent {
	var evs []perfdata.BuildIDEvent
	for _, m := range t.modules {
		if id := buildid.Module(sysModule, m[1]); id != nil {
			evs = append(evs, perfdata.BuildIDEvent{Misc: perfdata.MiscKernel, Pid: -1,
				BuildID: id, Filename: m[0]})
		}
	}
	return evs
}
