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

// kernelMapName is the name perf gives the kernel text map: the DSO name
// followed by the reference symbol its relocation is computed from.
const kernelMapName = "[kernel.kallsyms]_text"

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
	maps := append(append([]KernelMap{k.Text}, k.Trampolines...), mods...)
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
	if start == 0 || end <= start {
		return KernelMap{}
	}
	return KernelMap{name: kernelMapName, start: start, len: end - start, pgoff: start}
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

// scanKallsyms finds the _text and _etext symbols in /proc/kallsyms
// text, and the entry trampolines as perf's
// machine__create_extra_kernel_maps does: only if the kernel has a
// global _entry_trampoline, which lies before _etext, is the rest read.
func scanKallsyms(r io.Reader) (Kernel, error) {
	sc := bufio.NewScanner(r)
	var text, etext, entry uint64
	var found int
	var tramps []uint64
	for sc.Scan() && (found < 2 || entry != 0) {
		addr, typ, name, ok := kallsymsLine(sc.Bytes())
		if !ok {
			continue
		}
		switch name {
		case "_text":
			text = addr
			found++
		case "_etext":
			etext = addr
			found++
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
	if found < 2 || etext < text {
		return Kernel{}, errors.New("no _text/_etext symbols")
	}
	k := Kernel{Text: TextMap(text, etext)}
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
