package synth

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

func TestReadKernelMaps(t *testing.T) {
	text, err := kallsymsText("../testdata/kallsyms.txt")
	want := kernelMap{name: "[kernel.kallsyms]_text", start: 0xffffffff81000000, len: 0x1276508, pgoff: 0xffffffff81000000}
	if err != nil || text != want {
		t.Errorf("kernel text %+v %v, want %+v", text, err, want)
	}
	mods, err := readModules("../testdata/modules.txt")
	wantMods := []kernelMap{
		{name: "[ext4]", start: 0xffffffffc0a1b000, len: 1105920},
		{name: "[crc16]", start: 0xffffffffc0a10000, len: 12288},
	}
	if err != nil || !reflect.DeepEqual(mods, wantMods) {
		t.Errorf("modules %+v %v\nwant %+v", mods, err, wantMods)
	}
	// No /proc/modules: a kernel built without modules.
	if mods, err := readModules("../testdata/no-such-file"); err != nil || len(mods) != 0 {
		t.Errorf("without modules: %+v, %v", mods, err)
	}
	// Hidden addresses (kptr_restrict): no kernel maps, no error.
	hidden := strings.NewReader("0000000000000000 T _text\n0000000000000000 T _etext\n")
	if text, etext, err := kernelText(hidden); err != nil || text != 0 || etext != 0 {
		t.Errorf("hidden: %x %x %v", text, etext, err)
	}
	if _, _, err := kernelText(strings.NewReader("ffffffff81000000 T _text\n")); err == nil {
		t.Error("no _etext: no error")
	}
	if _, err := parseModules(strings.NewReader("ext4 zz 2 - Live 0xffffffffc0a1b000\n")); err == nil {
		t.Error("malformed module line: no error")
	}
}

// The kernel map matches what perf writes: PERF_RECORD_MMAP, misc
// KERNEL, pid -1, tid 0, pgoff = start, "[kernel.kallsyms]_text"; the
// BPF lookup of the text bounds agrees with /proc/kallsyms.
func TestKernelMapRecord(t *testing.T) {
	testenv.Root(t)
	b, err := NewBPF(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want, err := kallsymsText("/proc/kallsyms")
	if err != nil || want.start == 0 {
		t.Fatalf("kallsyms: %+v %v", want, err)
	}
	if b.text != want {
		t.Errorf("BPF kernel text %+v, kallsyms says %+v", b.text, want)
	}
	var recs [][]byte
	d := newDump(Options{}, func(rec []byte) error { recs = append(recs, bytes.Clone(rec)); return nil }, nil)
	if err := d.kernelMaps(b.text); err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no kernel map")
	}
	m, sid, err := perfdata.ParseMmap(recs[0], DefaultSampleType)
	if err != nil {
		t.Fatal(err)
	}
	if m.Misc != perfdata.MiscKernel || m.Pid != ^uint32(0) || m.Tid != 0 || m.Pgoff != m.Addr ||
		m.Filename != "[kernel.kallsyms]_text" || m.Len == 0 || sid.Time != 0 {
		t.Errorf("kernel map %+v %+v", m, sid)
	}
}

func TestParseGateLine(t *testing.T) {
	g, err := parseGateLine([]byte("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]"))
	if err != nil || *g != (gateVMA{start: 0xffffffffff600000, end: 0xffffffffff601000, prot: protExec}) {
		t.Errorf("%+v %v", g, err)
	}
	if _, err := parseGateLine([]byte("zz-1 r-xp [vsyscall]")); err == nil {
		t.Error("malformed line: no error")
	}
	rec := g.append(nil, DefaultSampleType, &perfdata.SampleID{Pid: 42, Tid: 42})
	m, _, err := perfdata.ParseMmap2(rec, DefaultSampleType)
	if err != nil || m.Pid != 42 || m.Filename != "[vsyscall]" || m.Misc != perfdata.MiscUser || m.Prot != protExec {
		t.Errorf("gate record %+v %v", m, err)
	}
}

// One paced read must fit in half a ring whatever the ring size.
func TestReadBudget(t *testing.T) {
	for _, pages := range []int{MinRingPages, DefaultRingPages, 4096} {
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
