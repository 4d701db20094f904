package dump

import (
	"reflect"
	"strings"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

func TestReadKernelMaps(t *testing.T) {
	text, err := KallsymsText("../../testdata/kallsyms.txt")
	want := KernelMap{name: "[kernel.kallsyms]_text", start: 0xffffffff81000000, len: 0x1276508, pgoff: 0xffffffff81000000}
	if err != nil || text != want {
		t.Errorf("kernel text %+v %v, want %+v", text, err, want)
	}
	mods, err := readModules("../../testdata/modules.txt")
	wantMods := []KernelMap{
		{name: "[ext4]", start: 0xffffffffc0a1b000, len: 1105920},
		{name: "[crc16]", start: 0xffffffffc0a10000, len: 12288},
	}
	if err != nil || !reflect.DeepEqual(mods, wantMods) {
		t.Errorf("modules %+v %v\nwant %+v", mods, err, wantMods)
	}
	// No /proc/modules: a kernel built without modules.
	if mods, err := readModules("../../testdata/no-such-file"); err != nil || len(mods) != 0 {
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

func TestParseGateLine(t *testing.T) {
	g, err := parseGateLine([]byte("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]"))
	if err != nil || *g != (Gate{Start: 0xffffffffff600000, End: 0xffffffffff601000, Prot: protExec}) {
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
