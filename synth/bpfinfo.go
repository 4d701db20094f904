package synth

import (
	"maps"
	"slices"

	"github.com/synth-dev/synth/internal/bpfprog"
	"github.com/synth-dev/synth/perfdata"
)

// bpfInfo collects, for each BPF_EVENT PROG_LOAD written, the program's
// information and BTF, read from the kernel as the record passes, as
// perf's side-band does (perf_env__add_bpf_info): perf report and perf
// annotate read them from the HEADER_BPF_PROG_INFO and HEADER_BPF_BTF
// sections to name and disassemble the program's code.
//
// In pipe mode the header is written before the records, and the
// sections stay empty, as perf leaves them: off is then set.
type bpfInfo struct {
	off   bool
	progs map[uint32][]byte // program id -> its perf_bpil entry
	btfs  map[uint32][]byte // BTF id -> raw BTF
}

func (b *bpfInfo) add(rec []byte) {
	ev := perfdata.BPFEventView(rec)
	if b.off || perfdata.RecordView(rec).Type() != perfdata.RecordBPFEvent || !ev.Fits() ||
		ev.EventType() != perfdata.BPFEventProgLoad {
		return
	}
	id := ev.ID()
	if _, ok := b.progs[id]; ok {
		return
	}
	p, err := bpfprog.Load(id)
	if err != nil {
		return // unloaded since: perf keeps nothing of it either
	}
	if b.progs == nil {
		b.progs, b.btfs = make(map[uint32][]byte), make(map[uint32][]byte)
	}
	b.progs[id] = p.AppendLinear(nil)
	if t := p.BTFID(); t != 0 {
		if _, ok := b.btfs[t]; !ok {
			if raw, err := bpfprog.BTF(t); err == nil {
				b.btfs[t] = raw
			}
		}
	}
}

// features returns the two sections, entries in id order.
func (b *bpfInfo) features() []perfdata.Feature {
	var progs [][]byte
	for _, id := range slices.Sorted(maps.Keys(b.progs)) {
		progs = append(progs, b.progs[id])
	}
	var btfs []perfdata.BTF
	for _, id := range slices.Sorted(maps.Keys(b.btfs)) {
		btfs = append(btfs, perfdata.BTF{ID: id, Data: b.btfs[id]})
	}
	return perfdata.BPFFeatures(progs, btfs)
}
