package dump

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
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

// kernelMaps emits the kernel's text map, then one map per module, as
// perf synthesizes them: PERF_RECORD_MMAP records, misc KERNEL, pid -1.
// Without kernel addresses (kptr_restrict), none are emitted.
func (d *Assembler) KernelMaps(text KernelMap) error {
	if text.start == 0 {
		return nil
	}
	mods, err := readModules("/proc/modules")
	if err != nil {
		return err
	}
	for _, km := range append([]KernelMap{text}, mods...) {
		m := perfdata.Mmap{
			Misc:     perfdata.MiscKernel,
			Pid:      kernelPid,
			Addr:     km.start,
			Len:      km.len,
			Pgoff:    km.pgoff,
			Filename: km.name,
		}
		d.buf = m.Append(d.buf[:0], d.sampleType, d.sampleID(kernelPid, 0))
		d.Stats.Kernel++
		d.Stats.Records++
		if err := d.emit(d.buf); err != nil {
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

// KallsymsText reads the kernel text map from a kallsyms file: the
// fallback when the BPF lookup is not available.
func KallsymsText(path string) (KernelMap, error) {
	f, err := os.Open(path)
	if err != nil {
		return KernelMap{}, fmt.Errorf("read kernel text: %w", err)
	}
	defer f.Close()
	text, etext, err := kernelText(f)
	if err != nil {
		return KernelMap{}, fmt.Errorf("read kernel text from %s: %w", path, err)
	}
	return TextMap(text, etext), nil
}

// readModules reads the module maps; a kernel without modules has no
// /proc/modules.
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
	return mods, nil
}

// kernelText finds the _text and _etext symbols in /proc/kallsyms text.
func kernelText(r io.Reader) (text, etext uint64, err error) {
	sc := bufio.NewScanner(r)
	var found int
	for sc.Scan() && found < 2 {
		addr, name, ok := kallsymsLine(sc.Bytes())
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
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found < 2 || etext < text {
		return 0, 0, errors.New("no _text/_etext symbols")
	}
	return text, etext, nil
}

// kallsymsLine splits "ffffffff81000000 T _text" into address and name;
// module symbols ("... [mod]") are not kernel text symbols.
func kallsymsLine(line []byte) (uint64, string, bool) {
	f := bytes.Fields(line)
	if len(f) != 3 {
		return 0, "", false
	}
	addr, err := strconv.ParseUint(string(f[0]), 16, 64)
	if err != nil {
		return 0, "", false
	}
	return addr, string(f[2]), true
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
