package bpfmethod

import (
	"bytes"
	"os"
	"testing"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

// The kernel map matches what perf writes: PERF_RECORD_MMAP, misc
// KERNEL, pid -1, tid 0, pgoff = start, "[kernel.kallsyms]_text" (_stext
// on a kernel without _text, arm64 before 6.2); the
// BPF lookup of the text bounds agrees with /proc/kallsyms.
func TestKernelMapRecord(t *testing.T) {
	testenv.Root(t)
	b, err := New(config.Resolved{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want, err := assemble.ReadKallsyms("/proc/kallsyms")
	if err != nil || want.Text == (assemble.KernelMap{}) {
		t.Fatalf("kallsyms: %+v %v", want, err)
	}
	if b.lo.text.Text != want.Text || len(want.Trampolines) != 0 {
		t.Errorf("BPF kernel text %+v, kallsyms says %+v", b.lo.text, want)
	}
	var recs [][]byte
	d := assemble.New(config.Resolved{}, func(rec []byte) error { recs = append(recs, bytes.Clone(rec)); return nil }, nil)
	if err := d.KernelMaps(b.lo.text); err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no kernel map")
	}
	m, sid, err := perfdata.ParseMmap(recs[0], config.DefaultSampleType)
	if err != nil {
		t.Fatal(err)
	}
	if m.Misc != perfdata.MiscKernel || m.Pid != ^uint32(0) || m.Tid != 0 || m.Pgoff != m.Addr ||
		(m.Filename != "[kernel.kallsyms]_text" && m.Filename != "[kernel.kallsyms]_stext") || m.Len == 0 || sid.Time != 0 {
		t.Errorf("kernel map %+v %+v", m, sid)
	}
}

// One paced read must fit in half a ring whatever the ring size.
func TestReadBudget(t *testing.T) {
	for _, pages := range []int{config.MinRingPages, config.DefaultRingPages, 4096} {
		ring := pages * os.Getpagesize()
		n := readBudget(ring)
		if n <= 0 {
			t.Errorf("%d pages: budget %d", pages, n)
		}
		// n pacing bytes stand for at most n*paceUnit ring bytes; the
		// object that crosses the read size may add two maximal records.
		if worst := n*paceUnit + 2*maxRecordBytes + 2*paceUnit; worst > ring {
			t.Errorf("%d pages: a read may emit %d bytes into a %d-byte ring", pages, worst, ring)
		}
	}
}
