package assemble

import (
	"bytes"
	"maps"
	"slices"

	"github.com/synth-dev/synth/internal/bpfprog"
	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/perfdata"
)

// Tables collects, from the records of a dump or a live stream, what a
// perf.data header keeps about the objects they name (perfdata.Tables):
// the build IDs of the files their MMAP2 records carry, of the modules
// their kernel maps name and of the vDSO, and the BPF programs their
// PROG_LOAD events name, as perf's side-band keeps them
// (perf_env__add_bpf_info). The Assembler fills one as it emits; a
// Session fills one with the live records it writes.
type Tables struct {
	ids map[string][]byte // file name -> build ID
	// last is the name of the record before, already in ids: a dump
	// writes a file's mappings one after another, and comparing with
	// the last name is cheaper than finding its end and hashing it.
	last []byte
	vdso bool // a [vdso] mapping was added
	// modules are the kernel module maps added: map name and module
	// name, in map order.
	modules [][2]string
	progs   map[uint32][]byte // program id -> its perf_bpil entry
	btfs    map[uint32][]byte // BTF id -> raw BTF
}

// sysModule is where the kernel shows the loaded modules' notes.
const sysModule = "/sys/module"

// vdsoName is the name of the vDSO's mappings, and perf's for its DSO.
const vdsoName = "[vdso]"

// Add notes what a record names: an MMAP2 record's build ID, a kernel
// map's module. Other records are ignored.
func (t *Tables) Add(rec []byte) {
	r := perfdata.RecordView(rec)
	switch r.Type() {
	case perfdata.RecordMmap2:
		t.addMapping(perfdata.Mmap2View(rec))
	case perfdata.RecordMmap:
		if r.Misc()&perfdata.MiscKernel != 0 {
			t.addKernelMap(rec)
		}
	}
}

// AddLive is Add for a record of the live stream, which also notes the
// program of a BPF_EVENT PROG_LOAD: it is read from the kernel as the
// record passes, as perf's side-band reads it. A program unloaded since
// is left out, as perf leaves it out.
func (t *Tables) AddLive(rec []byte) {
	ev := perfdata.BPFEventView(rec)
	if perfdata.RecordView(rec).Type() != perfdata.RecordBPFEvent || !ev.Fits() ||
		ev.EventType() != perfdata.BPFEventProgLoad {
		t.Add(rec)
		return
	}
	if _, ok := t.progs[ev.ID()]; ok {
		return
	}
	p, err := bpfprog.Load(ev.ID())
	if err != nil {
		return
	}
	var raw []byte
	if p.BTFID() != 0 {
		raw, _ = bpfprog.BTF(p.BTFID())
	}
	t.addProg(p, raw)
}

// addProg notes a program whose PROG_LOAD is written, and its BTF,
// rawBTF (nil when it has none, or it could not be read).
func (t *Tables) addProg(p *bpfprog.Prog, rawBTF []byte) {
	if t.progs == nil {
		t.progs, t.btfs = make(map[uint32][]byte), make(map[uint32][]byte)
	}
	t.progs[p.ID()] = p.AppendLinear(nil)
	if id := p.BTFID(); id != 0 && rawBTF != nil {
		t.btfs[id] = rawBTF
	}
}

func (t *Tables) addMapping(m perfdata.Mmap2View) {
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
func (t *Tables) addKernelMap(rec []byte) {
	m, _, err := perfdata.ParseMmap(rec, 0) // the name ends at its NUL, before the trailer
	if err != nil {
		return
	}
	if mod, ok := ModuleName(m.Filename); ok {
		t.modules = append(t.modules, [2]string{m.Filename, mod})
	}
}

// Result returns what was collected. The build IDs, unless !buildIDs,
// are the kernel's (from /sys/kernel/notes) if kernel, then its
// modules' (from /sys/module), in map order, as misc KERNEL; then the
// files sorted by name, and the 64-bit vDSO's as [vdso] when a mapping
// of it was added, as perf lists them. The programs and BTF objects are
// in id order.
func (t *Tables) Result(kernel, buildIDs bool) perfdata.Tables {
	var out perfdata.Tables
	if buildIDs {
		out.BuildIDs = t.buildIDs(kernel)
	}
	for _, id := range slices.Sorted(maps.Keys(t.progs)) {
		out.BPFProgs = append(out.BPFProgs, perfdata.BPFProg{ID: id, Info: t.progs[id]})
	}
	for _, id := range slices.Sorted(maps.Keys(t.btfs)) {
		out.BTFs = append(out.BTFs, perfdata.BTF{ID: id, Data: t.btfs[id]})
	}
	return out
}

func (t *Tables) buildIDs(kernel bool) []perfdata.BuildIDEvent {
	var evs []perfdata.BuildIDEvent
	if kernel {
		if id := buildid.Kernel(); id != nil {
			evs = append(evs, perfdata.BuildIDEvent{Misc: perfdata.MiscKernel, Pid: -1,
				BuildID: id, Filename: "[kernel.kallsyms]"})
		}
	}
	evs = append(evs, t.moduleEvents(sysModule)...)
	for _, name := range slices.Sorted(maps.Keys(t.ids)) {
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
func (t *Tables) moduleEvents(sysModule string) []perfdata.BuildIDEvent {
	var evs []perfdata.BuildIDEvent
	for _, m := range t.modules {
		if id := buildid.Module(sysModule, m[1]); id != nil {
			evs = append(evs, perfdata.BuildIDEvent{Misc: perfdata.MiscKernel, Pid: -1,
				BuildID: id, Filename: m[0]})
		}
	}
	return evs
}
