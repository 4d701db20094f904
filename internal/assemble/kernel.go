package assemble

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/synth-dev/synth/perfdata"
)

// kernelPid is the pid perf gives the kernel's maps (HOST_KERNEL_ID).
const kernelPid = ^uint32(0)

// kernelDSO is the name perf gives the kernel's DSO; its text map's
// name adds the reference symbol its relocation is computed from,
// "[kernel.kallsyms]_text" (KernelMap.name).
const kernelDSO = "[kernel.kallsyms]"

// refSymbols are the symbols perf takes the kernel text's start from, in
// its order (ref_reloc_sym_names, tools/perf/util/machine.c): arm64
// kernels before 6.2 have no _text in kallsyms, only _stext.
var refSymbols = [...]string{"_text", "_stext"}

// openEnd is the end of a kernel text map whose end perf could not find
// in kallsyms: ~0ULL, until a module above the text bounds it.
const openEnd = ^uint64(0)

// KernelMap is one kernel or module text map.
type KernelMap struct {
	name       string
	start, len uint64
	pgoff      uint64
}

// Kernel is what the kernel's own maps are made of: the text map and,
// on x86-64 kernels that map them, the PTI entry trampolines.
type Kernel struct {
	Text        KernelMap
	Trampolines []KernelMap
}

// KernelMaps emits the kernel's text map, its entry trampolines, then
// one map per module, by address, as perf synthesizes them
// (perf_event__synthesize_kernel_mmap, _extra_kmaps, _modules):
// PERF_RECORD_MMAP records, misc KERNEL, pid -1. Without kernel
// addresses (kptr_restrict), none are emitted.
func (d *Assembler) KernelMaps(k Kernel) error {
	if k.Text.start == 0 {
		return nil
	}
	mods, err := readModules("/proc/modules")
	if err != nil {
		return err
	}
	if len(mods) > 0 {
		modulePaths(mods, libModules())
	}
	text := k.Text
	if text.start+text.len == openEnd {
		text = boundText(text, mods)
	}
	maps := append(append([]KernelMap{text}, k.Trampolines...), mods...)
	for _, km := range maps {
		m := perfdata.Mmap{
			Misc:     perfdata.MiscKernel,
			Pid:      kernelPid,
			Addr:     km.start,
			Len:      km.len,
			Pgoff:    km.pgoff,
			Filename: km.name,
		}
		if err := d.emitKernel(m.Append(d.buf[:0], d.sampleType, d.sampleID(kernelPid, 0))); err != nil {
			return err
		}
	}
	return nil
}

// TextMap is the kernel text map for the bounds of _text and _etext.
func TextMap(start, end uint64) KernelMap {
	return textMap(refSymbols[0], start, end)
}

// textMap is the kernel text map from reference symbol ref at start to
// end (openEnd: not known).
func textMap(ref string, start, end uint64) KernelMap {
	if start == 0 || end <= start {
		return KernelMap{}
	}
	return KernelMap{name: kernelDSO + ref, start: start, len: end - start, pgoff: start}
}

// boundText ends a text map of open end where the first module above it
// begins, as perf's machine__create_kernel_maps does; without one (arm64
// puts its modules below the kernel) it runs to the top of the address
// space, as in perf.
func boundText(text KernelMap, mods []KernelMap) KernelMap {
	for _, m := range mods { // by address
		if m.start > text.start {
			text.len = m.start - text.start
			break
		}
	}
	return text
}

// ReadKallsyms reads the kernel text map and the entry trampolines from
// a kallsyms file: the fallback when the BPF lookup is not available.
func ReadKallsyms(path string) (Kernel, error) {
	f, err := os.Open(path)
	if err != nil {
		return Kernel{}, fmt.Errorf("read kernel text: %w", err)
	}
	defer f.Close()
	k, err := scanKallsyms(f)
	if err != nil {
		return Kernel{}, fmt.Errorf("read kernel text from %s: %w", path, err)
	}
	return k, nil
}

// readModules reads the module maps, by address; a kernel without
// modules has no /proc/modules.
func readModules(path string) ([]KernelMap, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read modules: %w", err)
	}
	defer f.Close()
	mods, err := parseModules(f)
	if err != nil {
		return nil, fmt.Errorf("read modules from %s: %w", path, err)
	}
	slices.SortStableFunc(mods, func(a, b KernelMap) int { return cmp.Compare(a.start, b.start) })
	return mods, nil
}

// Trampoline symbols of x86-64 kernels 4.15 to 4.19 with page-table
// isolation: one __entry_SYSCALL_64_trampoline per CPU, a page each,
// mapping the code at _entry_trampoline (ENTRY_TRAMPOLINE_NAME in perf).
const (
	entryTrampoline   = "_entry_trampoline"
	trampolineMapName = "__entry_SYSCALL_64_trampoline"
)

// scanKallsyms finds the kernel text in /proc/kallsyms text as perf's
// machine__get_running_kernel_start does: it starts at the first of
// refSymbols that is a function symbol and ends at _etext if that is one
// too (arm64's _etext, the start of its read-only data, is not: the map
// then has an open end). The entry trampolines are read as perf's
// machine__create_extra_kernel_maps does: only if the kernel has a
// global _entry_trampoline, which lies before _etext, is the rest read.
func scanKallsyms(r io.Reader) (Kernel, error) {
	sc := bufio.NewScanner(r)
	var refs [len(refSymbols)]uint64
	var etext, entry uint64
	var seen, seenEtext bool // hidden addresses (kptr_restrict) are 0
	var tramps []uint64
	for sc.Scan() && (!seenEtext || entry != 0) {
		addr, typ, name, ok := kallsymsLine(sc.Bytes())
		if !ok {
			continue
		}
		fn := typ == 'T' || typ == 't' || typ == 'W' || typ == 'w' // kallsyms__is_function
		switch name {
		case refSymbols[0], refSymbols[1]:
			if i := slices.Index(refSymbols[:], name); fn && refs[i] == 0 {
				refs[i], seen = addr, true
			}
		case "_etext":
			if fn {
				etext, seenEtext = addr, true
			}
		case entryTrampoline:
			if typ >= 'A' && typ <= 'Z' && entry == 0 {
				entry = addr
			}
		case trampolineMapName:
			tramps = append(tramps, addr)
		}
	}
	if err := sc.Err(); err != nil {
		return Kernel{}, err
	}
	i := slices.IndexFunc(refs[:], func(a uint64) bool { return a != 0 })
	switch {
	case i < 0 && seen:
		return Kernel{}, nil // no kernel maps, as perf writes none
	case i < 0:
		return Kernel{}, errors.New("no _text or _stext function symbol")
	}
	end := etext
	if end == 0 {
		end = openEnd
	}
	k := Kernel{Text: textMap(refSymbols[i], refs[i], end)}
	if entry == 0 || k.Text.start == 0 {
		return k, nil
	}
	slices.Sort(tramps)
	for _, a := range tramps {
		k.Trampolines = append(k.Trampolines, KernelMap{name: trampolineMapName, start: a,
			len: uint64(os.Getpagesize()), pgoff: entry})
	}
	return k, nil
}

// kallsymsLine splits "ffffffff81000000 T _text" into address, type and
// name; module symbols ("... [mod]") are not kernel text symbols.
func kallsymsLine(line []byte) (uint64, byte, string, bool) {
	f := bytes.Fields(line)
	if len(f) != 3 || len(f[1]) != 1 {
		return 0, 0, "", false
	}
	addr, err := strconv.ParseUint(string(f[0]), 16, 64)
	if err != nil {
		return 0, 0, "", false
	}
	return addr, f[1][0], string(f[2]), true
}

// parseModules reads /proc/modules lines, "name size refs deps state addr",
// into maps named "[name]", as perf names modules it has no path for.
func parseModules(r io.Reader) ([]KernelMap, error) {
	var maps []KernelMap
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 6 {
			return nil, fmt.Errorf("malformed line %q", sc.Bytes())
		}
		size, err1 := strconv.ParseUint(string(f[1]), 10, 64)
		addr, err2 := strconv.ParseUint(string(bytes.TrimPrefix(f[5], []byte("0x"))), 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("malformed line %q", sc.Bytes())
		}
		if addr == 0 {
			continue // hidden address
		}
		maps = append(maps, KernelMap{name: "[" + string(f[0]) + "]", start: addr, len: size})
	}
	return maps, sc.Err()
}
