package synth

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// LocationKind says what holds an address of a process (Table.Resolve).
type LocationKind uint8

// Kinds of locations.
const (
	// LocationFile is a mapping of a file: Location.Offset is the
	// address's offset in the file, Location.Mapping.BuildID its build
	// ID if the kernel or the dump read one.
	LocationFile LocationKind = iota + 1
	// LocationAnon is memory of no file: "//anon" (JIT code, say),
	// "[heap]", "[stack]", "[anon:name]" and the kernel's other
	// bracketed mappings but the vDSO's.
	LocationAnon
	// LocationVDSO is the vDSO ("[vdso]"), or on x86-64 the vsyscall
	// page ("[vsyscall]", which no MMAP2 reports): Offset is the
	// address's offset in the image, as a file's is.
	LocationVDSO
	// LocationKernel is an address of the kernel's half of the address
	// space: the kernel, a module or a BPF program, the same in every
	// process. Resolve does not say which: the kernel's symbols are
	// /proc/kallsyms', the stream's KSYMBOL records, and the kernel
	// maps of a dump.
	LocationKernel
)

// String names the kind, as its constant does without "Location",
// in lower case.
func (k LocationKind) String() string {
	switch k {
	case LocationFile:
		return "file"
	case LocationAnon:
		return "anon"
	case LocationVDSO:
		return "vdso"
	case LocationKernel:
		return "kernel"
	}
	return fmt.Sprintf("LocationKind(%d)", uint8(k))
}

// Location is what Table.Resolve says of an address: a value of its
// own, which no later Apply changes.
type Location struct {
	Kind LocationKind
	Addr uint64
	// Mapping is a copy of the mapping that holds Addr, its BuildID
	// too; the zero Mapping for LocationKernel.
	Mapping Mapping
	// Offset is Addr's offset in the file of a LocationFile, or in the
	// image of a LocationVDSO: Addr - Mapping.Start + Mapping.Pgoff,
	// what a reader of /proc/PID/maps computes from the line that holds
	// Addr. 0 for the other kinds.
	Offset uint64
}

// kernelStart is where the kernel's half of the address space begins
// on 64-bit Linux: every kernel address has the top bit set (x86-64's
// from 0xffff800000000000, or 0xff00000000000000 with 5-level paging;
// arm64's, riscv64's, ppc64's), no user address has. 32-bit kernels
// split where they are built to (often 0xc0000000), and s390x gives
// the kernel an address space of its own: Resolve does not classify
// kernel addresses there.
const kernelStart = 1 << 63

// vsyscall is x86-64's legacy vsyscall page, at a fixed address in
// every process (where the kernel has not disabled it, vsyscall=none).
const vsyscall, vsyscallEnd = 0xffffffffff600000, 0xffffffffff601000

// Resolve says what holds address addr of process pid, as a symbolizer
// asks: which mapping, and in a file's the file offset and build ID.
// It classifies by address and by the mapping's path, not by the
// sample's PERF_RECORD_MISC_CPUMODE_MASK:
//   - an address in the kernel's half (on 64-bit Linux, the top bit
//     set) is LocationKernel, of any process, known or not; but for
//     x86-64's vsyscall page, LocationVDSO;
//   - else the process's mapping that holds addr decides: "[vdso]" is
//     LocationVDSO; "//anon", "/dev/zero", "/anon_hugepage" and the
//     kernel's other bracketed names ("[heap]", "[stack]") are
//     LocationAnon, as perf tells them; any other path is LocationFile.
//
// ok is false when the table has no such process, or no mapping of it
// holds addr. The table holds the mappings its Session reports:
// executable ones only unless Options.Data.
func (t *Table) Resolve(pid uint32, addr uint64) (loc Location, ok bool) {
	if kernelAddr(addr) {
		if runtime.GOARCH == "amd64" && addr >= vsyscall && addr < vsyscallEnd {
			m := Mapping{Start: vsyscall, End: vsyscallEnd, Prot: unix.PROT_EXEC, Path: "[vsyscall]"}
			return Location{Kind: LocationVDSO, Addr: addr, Mapping: m, Offset: addr - vsyscall}, true
		}
		return Location{Kind: LocationKernel, Addr: addr}, true
	}
	p, ok := t.procs[pid]
	if !ok {
		return Location{}, false
	}
	m, ok := p.Lookup(addr)
	if !ok {
		return Location{}, false
	}
	loc = Location{Kind: mappingKind(m.Path), Addr: addr, Mapping: *m}
	loc.Mapping.BuildID = slices.Clone(m.BuildID)
	if loc.Kind == LocationFile || loc.Kind == LocationVDSO {
		loc.Offset = addr - m.Start + m.Pgoff
	}
	return loc, true
}

// kernelAddr reports whether addr is in the kernel's half of a 64-bit
// address space. s390x gives the kernel an address space of its own,
// whose addresses overlap the processes': none is told there.
func kernelAddr(addr uint64) bool {
	return addr >= kernelStart && ^uintptr(0)>>63 == 1 && runtime.GOARCH != "s390x"
}

// mappingKind classifies a mapping by its path, as perf's
// is_anon_memory and is_no_dso_memory do.
func mappingKind(path string) LocationKind {
	switch {
	case path == "[vdso]":
		return LocationVDSO
	case path == "", strings.HasPrefix(path, "["), strings.HasPrefix(path, "//anon"),
		strings.HasPrefix(path, "/dev/zero"), strings.HasPrefix(path, "/anon_hugepage"):
		return LocationAnon
	}
	return LocationFile
}
