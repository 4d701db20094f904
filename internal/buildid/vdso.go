package buildid

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"

	"github.com/synth-dev/synth/internal/elfnote"
)

// kernelOrder reads what the kernel hands out in its own layout, the
// host's byte order: the auxv (/proc/self/auxv), and the ELF notes of
// /sys/kernel/notes and /sys/module/NAME/notes. A mapped file's notes
// are read in the file's byte order instead.
var kernelOrder = binary.NativeEndian

// atSysinfoEhdr is AT_SYSINFO_EHDR (include/uapi/linux/auxvec.h): the
// address of the vDSO the kernel mapped into the process.
const atSysinfoEhdr = 33

// maxVDSO bounds the vDSO image read: it is a few pages.
const maxVDSO = 1 << 20

// VDSO returns the build ID of the kernel's 64-bit vDSO, the image every
// 64-bit process maps as [vdso], read from this process's own mapping
// (its start from the auxiliary vector, its length from /proc/self/maps).
// perf lists it in HEADER_BUILD_ID under the name [vdso]. nil when it
// cannot be read.
func VDSO() []byte {
	img := VDSOImage()
	if img == nil {
		return nil
	}
	id, err := elfnote.BuildID(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		return nil
	}
	return id
}

// VDSOImage returns the image of the kernel's 64-bit vDSO, copied from
// this process's own [vdso] mapping: the file perf stores in its
// build-ID cache as [vdso]/BUILDID/vdso. nil when it cannot be read.
func VDSOImage() []byte {
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return nil
	}
	var start uint64
	for len(auxv) >= 16 {
		if kernelOrder.Uint64(auxv) == atSysinfoEhdr {
			start = kernelOrder.Uint64(auxv[8:])
		}
		auxv = auxv[16:]
	}
	size := vdsoSize(start)
	if start == 0 || size == 0 {
		return nil
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return nil
	}
	defer mem.Close()
	img := make([]byte, size)
	if _, err := mem.ReadAt(img, int64(start)); err != nil {
		return nil
	}
	return img
}

// vdsoSize returns the length of the [vdso] mapping at start.
func vdsoSize(start uint64) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(maps) {
		if !bytes.HasSuffix(bytes.TrimSpace(line), []byte("[vdso]")) {
			continue
		}
		lo, rest, _ := bytes.Cut(line, []byte("-"))
		hi, _, _ := bytes.Cut(rest, []byte(" "))
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		b, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 == nil && err2 == nil && a == start && b > a && b-a <= maxVDSO {
			return int(b - a)
		}
	}
	return 0
}
