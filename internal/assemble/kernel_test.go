package assemble

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/perfdata"
)

func TestReadKernelMaps(t *testing.T) {
	k, err := ReadKallsyms("../../testdata/kallsyms.txt")
	want := KernelMap{name: "[kernel.kallsyms]_text", start: 0xffffffff81000000, len: 0x1276508, pgoff: 0xffffffff81000000}
	if err != nil || k.Text != want || k.Trampolines != nil {
		t.Errorf("kernel text %+v %v, want %+v", k, err, want)
	}
	mods, err := readModules("../../testdata/modules.txt")
	wantMods := []KernelMap{ // by address, as perf's maps are
		{name: "[crc16]", start: 0xffffffffc0a10000, len: 12288},
		{name: "[ext4]", start: 0xffffffffc0a1b000, len: 1105920},
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
	if k, err := scanKallsyms(hidden); err != nil || k.Text != (KernelMap{}) {
		t.Errorf("hidden: %+v %v", k, err)
	}
	if _, err := scanKallsyms(strings.NewReader("ffffffff81000000 D _text\nffffffff82276508 T _etext\n")); err == nil {
		t.Error("no _text or _stext function: no error")
	}
	if _, err := parseModules(strings.NewReader("ext4 zz 2 - Live 0xffffffffc0a1b000\n")); err == nil {
		t.Error("malformed module line: no error")
	}
}

// An arm64 kernel before 6.2 has no _text and its _etext is not a
// function symbol (lines from Debian's 6.1 arm64 kernel): perf 6.1 names
// the map after _stext and, with no module above it, runs it to the top
// of the address space (perf script -D there: "[0xffffafe717c10000(0x5018e83effff)
// @ 0xffffafe717c10000]: x [kernel.kallsyms]_stext").
func TestReadKernelMapsArm64(t *testing.T) {
	k, err := ReadKallsyms("../../testdata/kallsyms-arm64.txt")
	want := KernelMap{name: "[kernel.kallsyms]_stext", start: 0xffffafe717c10000, len: 0x5018e83effff, pgoff: 0xffffafe717c10000}
	if err != nil || k.Text != want {
		t.Fatalf("kernel text %+v %v, want %+v", k, err, want)
	}
	below := []KernelMap{{name: "[ext4]", start: 0xffffafe6e26cc000, len: 782336}}
	if got := boundText(k.Text, below); got != want {
		t.Errorf("with a module below: %+v, want %+v", got, want)
	}
	above := append(below, KernelMap{name: "[x]", start: 0xffffafe720000000, len: 4096})
	want.len = 0xffffafe720000000 - want.start
	if got := boundText(k.Text, above); got != want {
		t.Errorf("with a module above: %+v, want %+v", got, want)
	}
}

// A kernel with PTI entry trampolines (x86-64, 4.15 to 4.19) gets one
// page-long map per CPU, by address, each mapping _entry_trampoline, as
// perf's machine__create_extra_kernel_maps makes them.
func TestEntryTrampolines(t *testing.T) {
	k, err := ReadKallsyms("../../testdata/kallsyms-pti.txt")
	page := uint64(os.Getpagesize())
	want := []KernelMap{
		{name: "__entry_SYSCALL_64_trampoline", start: 0xfffffe0000002000, len: page, pgoff: 0xffffffff81a00000},
		{name: "__entry_SYSCALL_64_trampoline", start: 0xfffffe0000006000, len: page, pgoff: 0xffffffff81a00000},
	}
	if err != nil || !reflect.DeepEqual(k.Trampolines, want) {
		t.Errorf("trampolines %+v %v\nwant %+v", k.Trampolines, err, want)
	}
	var recs []perfdata.Mmap
	d := New(config.Resolved{}, func(rec []byte) error {
		m, _, err := perfdata.ParseMmap(rec, config.DefaultSampleType)
		recs = append(recs, m)
		return err
	}, nil)
	if err := d.KernelMaps(k); err != nil {
		t.Fatal(err)
	}
	if len(recs) < 3 || recs[0].Filename != kernelDSO+"_text" {
		t.Fatalf("kernel maps %+v", recs)
	}
	for i, m := range recs[1:3] {
		if m.Misc != perfdata.MiscKernel || m.Pid != ^uint32(0) || m.Addr != want[i].start ||
			m.Len != page || m.Pgoff != want[i].pgoff || m.Filename != want[i].name {
			t.Errorf("trampoline map %d: %+v", i, m)
		}
	}
}

// Module maps are named after their files under /lib/modules/RELEASE
// (compressed or not, '-' in the file name for '_' in the module's),
// as perf names them; a module without a file keeps "[name]".
func TestModulePaths(t *testing.T) {
	dir := t.TempDir()
	files := []string{"kernel/fs/ext4/ext4.ko.xz", "kernel/net/nf-conntrack.ko", "build/kernel/crc16.ko", "kernel/crc16.txt"}
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mods := []KernelMap{{name: "[crc16]"}, {name: "[ext4]"}, {name: "[nf_conntrack]"}}
	modulePaths(mods, dir)
	want := []string{"[crc16]", filepath.Join(dir, files[0]), filepath.Join(dir, files[1])}
	for i, m := range mods {
		if m.name != want[i] {
			t.Errorf("module %d named %q, want %q", i, m.name, want[i])
		}
	}
	for name, want := range map[string]string{"[ext4]": "ext4", want[1]: "ext4", want[2]: "nf_conntrack",
		kernelDSO + "_text": "", "__entry_SYSCALL_64_trampoline": "", "/x/ext4.txt": ""} {
		if got, ok := ModuleName(name); got != want || ok != (want != "") {
			t.Errorf("ModuleName(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// Only the trampolines and dispatchers of the [bpf] module are images,
// a page long each, as perf's kallsyms_process_symbol picks them.
func TestBPFImages(t *testing.T) {
	f, err := os.ReadFile("../../testdata/kallsyms.txt")
	if err != nil {
		t.Fatal(err)
	}
	syms, err := BPFImages(bytes.NewReader(f))
	page := uint32(os.Getpagesize())
	want := []perfdata.Ksymbol{
		{Addr: 0xffffffffa0001000, Len: page, Type: perfdata.KsymbolTypeBPF, Name: "bpf_trampoline_6442485473"},
		{Addr: 0xffffffffa0002000, Len: page, Type: perfdata.KsymbolTypeBPF, Name: "bpf_dispatcher_xdp"},
	}
	if err != nil || !reflect.DeepEqual(syms, want) {
		t.Errorf("images %+v %v\nwant %+v", syms, err, want)
	}
}
