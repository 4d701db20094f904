package bpfmethod

import (
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// Every synth-private record type of bpf/synth.h is in perfdata's
// private range, which the writer refuses, and none is perf's.
func TestPrivateTypesInRange(t *testing.T) {
	for _, typ := range []perfdata.RecordType{recordWalk, recordMmap2Next, recordPending, RecordUnmap} {
		if !typ.Private() {
			t.Errorf("type %#x is outside perfdata's private range [%#x, %#x]",
				uint32(typ), uint32(perfdata.RecordPrivateFirst), uint32(perfdata.RecordPrivateLast))
		}
	}
	for typ := perfdata.RecordMmap; typ <= perfdata.RecordFinishedInit; typ++ {
		if typ.Private() {
			t.Errorf("perf's type %v is in the private range", typ)
		}
	}
}
