package synth

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

// kernelMap is one kernel or module text map.
type kernelMap struct {
	name       string
	start, len uint64
	pgoff      uint64
}

// kernelMaps emits the kernel's text map, then one map per module, as
// perf synthesizes them: PERF_RECORD_MMAP records, misc KERNEL, pid -1.
// Without kernel addresses (kptr_restrict), none are emitted.
func (d *dump) kernelMaps() error {
	maps, err := readKernelMaps("/proc/kallsyms", "/proc/modules")
	if err != nil {
		return err
	}
	for _, km := range maps {
		m := perfdata.Mmap{
			Misc:     perfdata.MiscKernel,
			Pid:      kernelPid,
			Addr:     km.start,
			Len:      km.len,
			Pgoff:    km.pgoff,
			Filename: km.name,
		}
		d.buf = m.Append(d.buf[:0], d.sampleType, &perfdata.SampleID{Pid: kernelPid})
		d.stats.Kernel++
		d.stats.Records++
		if err := d.emit(d.buf); err != nil {
			return err
		}
	}
	return nil
}

func readKernelMaps(kallsyms, modules string) ([]kernelMap, error) {
	f, err := os.Open(kallsyms)
	if err != nil {
		return nil, fmt.Errorf("read kernel text: %w", err)
	}
	defer f.Close()
	text, etext, err := kernelText(f)
	if err != nil {
		return nil, fmt.Errorf("read kernel text from %s: %w", kallsyms, err)
	}
	if text == 0 {
		return nil, nil // addresses hidden
	}
	maps := []kernelMap{{name: kernelMapName, start: text, len: etext - text, pgoff: text}}
	mf, err := os.Open(modules)
	if errors.Is(err, os.ErrNotExist) {
		return maps, nil // a kernel without modules
	}
	if err != nil {
		return nil, fmt.Errorf("read modules: %w", err)
	}
	defer mf.Close()
	mods, err := parseModules(mf)
	if err != nil {
		return nil, fmt.Errorf("read modules from %s: %w", modules, err)
	}
	return append(maps, mods...), nil
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
func parseModules(r io.Reader) ([]kernelMap, error) {
	var maps []kernelMap
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
		maps = append(maps, kernelMap{name: "[" + string(f[0]) + "]", start: addr, len: size})
	}
	return maps, sc.Err()
}
