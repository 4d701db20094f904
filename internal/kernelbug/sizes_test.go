package kernelbug

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

// The bugs' names, as the skips give them.
const (
	bugKsymbol  = "perf_event_ksymbol_output() grows the shared record's header.size by each listener's sample_id trailer (docs/kernel/sideband-sizes.md)"
	bugBPFEvent = "perf_event_bpf_output() grows the shared record's header.size by each listener's sample_id trailer (docs/kernel/sideband-sizes.md)"
)

// progName names the program the test loads; its KSYMBOL is
// bpf_prog_TAG_kbug_probe.
const progName = "kbug_probe"

// TestKsymbolSizeGrows loads a BPF program while two listeners with
// trailers of different sizes hear this thread: the kernel makes one
// KSYMBOL and one BPF_EVENT record of the load and serves the newer
// listener first.
func TestKsymbolSizeGrows(t *testing.T) {
	older, newer, _ := loadHeard(t)
	olderRecs := ksymbolsOf(older.records(t, perfdata.RecordKsymbol))
	newerRecs := ksymbolsOf(newer.records(t, perfdata.RecordKsymbol))
	checkGrowth(t, bugKsymbol, "KSYMBOL", older, newer, olderRecs, newerRecs, ksymbolSize)
}

func TestBPFEventSizeGrows(t *testing.T) {
	older, newer, id := loadHeard(t)
	olderRecs := bpfEventsOf(older.records(t, perfdata.RecordBPFEvent), id)
	newerRecs := bpfEventsOf(newer.records(t, perfdata.RecordBPFEvent), id)
	checkGrowth(t, bugBPFEvent, "BPF_EVENT", older, newer, olderRecs, newerRecs, bpfEventSize)
}

// loadHeard opens the two listeners, the older first, and loads a
// program on this thread, which they both hear, and returns its id.
func loadHeard(t *testing.T) (older, newer *listener, id ebpf.ProgramID) {
	testenv.Root(t)
	lockThread(t)
	flags := uint64(perfdata.AttrKsymbol | perfdata.AttrBPFEvent)
	older = listen(t, flags, olderSample)
	newer = listen(t, flags, newerSample)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    progName,
		Type:    ebpf.SocketFilter,
		License: "MIT",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close() // reported too, as an unload, if it frees the program now
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("the kernel gives no program ids")
	}
	return older, newer, id
}

// bpfEventsOf keeps the BPF_EVENT records of the program id: header,
// type (u16), flags (u16), id (u32), tag.
func bpfEventsOf(recs [][]byte, id ebpf.ProgramID) [][]byte {
	var ours [][]byte
	for _, rec := range recs {
		if ebpf.ProgramID(le.Uint32(rec[12:])) == id {
			ours = append(ours, rec)
		}
	}
	return ours
}

// ksymbolsOf keeps the KSYMBOL records of the test's program: a kernel
// may report others of the same load (a dispatcher it patches).
func ksymbolsOf(recs [][]byte) [][]byte {
	var ours [][]byte
	for _, rec := range recs {
		if strings.HasSuffix(ksymbolName(rec), "_"+progName) {
			ours = append(ours, rec)
		}
	}
	return ours
}

// ksymbolName reads the name of a KSYMBOL record: header, addr (u64),
// len (u32), ksym_type (u16), flags (u16), then the NUL-terminated name.
func ksymbolName(rec []byte) string {
	name := rec[24:]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return string(name)
}

// ksymbolSize is what perf_event_ksymbol() makes a KSYMBOL's size: the
// fixed part, the name with its NUL padded to 8 bytes, the trailer.
func ksymbolSize(rec []byte, idSize int) int {
	return 24 + align8(len(ksymbolName(rec))+1) + idSize
}

// bpfEventSize is a BPF_EVENT's: header, type (u16), flags (u16), id
// (u32), tag (8 bytes), the trailer.
func bpfEventSize(_ []byte, idSize int) int { return 24 + idSize }
