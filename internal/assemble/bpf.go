package assemble

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/synth-dev/synth/internal/bpfprog"
	"github.com/synth-dev/synth/perfdata"
)

// BPFPrograms emits, unless NoKernel, the loaded BPF programs as perf
// record synthesizes them (perf_event__synthesize_bpf_events), ids
// ascending: a KSYMBOL for each JITed function, then, unless NoBPFEvent,
// the program's BPF_EVENT PROG_LOAD; then a KSYMBOL for each BPF
// trampoline and dispatcher in /proc/kallsyms. Without the privilege to
// list programs there are none, as with perf; a program unloaded while
// it is read is left out.
func (d *Assembler) BPFPrograms() error {
	if d.opts.NoKernel {
		return nil
	}
	ids, err := bpfprog.IDs()
	if errors.Is(err, bpfprog.ErrPermission) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("synthesize BPF programs: %w", err)
	}
	var xdp bool
	for _, id := range ids {
		p, err := bpfprog.Load(id)
		if err != nil {
			continue
		}
		xdp = xdp || p.Type() == bpfprog.ProgTypeXDP
		if err := d.bpfProgram(p, rawBTF(p.BTFID())); err != nil {
			return err
		}
	}
	// Trampolines exist only for tracing links, the dispatcher only
	// runs XDP programs: without either, /proc/kallsyms (tens of
	// milliseconds to read) holds no image a sample can be in.
	if tracing, _ := bpfprog.HasTracingLinks(); !xdp && !tracing {
		return nil
	}
	return d.bpfImages("/proc/kallsyms")
}

// bpfProgram emits the records of one program.
func (d *Assembler) bpfProgram(p *bpfprog.Prog, rawBTF []byte) error {
	for _, s := range p.Symbols(rawBTF) {
		k := perfdata.Ksymbol{Addr: s.Addr, Len: s.Len, Type: perfdata.KsymbolTypeBPF, Name: s.Name}
		if err := d.emitKernel(k.Append(d.buf[:0], d.sampleType, d.sampleID(kernelPid, 0))); err != nil {
			return err
		}
	}
	d.Stats.BPFPrograms++
	if d.opts.NoBPFEvent {
		return nil
	}
	d.tables.addProg(p, rawBTF)
	e := perfdata.BPFEvent{Type: perfdata.BPFEventProgLoad, ID: p.ID(), Tag: p.Tag()}
	return d.emitKernel(e.Append(d.buf[:0], d.sampleType, d.sampleID(kernelPid, 0)))
}

// emitKernel emits a record of the kernel's: a map or a symbol.
func (d *Assembler) emitKernel(rec []byte) error {
	d.buf = rec
	d.Stats.Kernel++
	d.Stats.Records++
	return d.Emit(rec)
}

// rawBTF returns BTF object id; nil when the program has none or it
// cannot be read, and its functions are then named as perf names them
// without BTF.
func rawBTF(id uint32) []byte {
	if id == 0 {
		return nil
	}
	b, _ := bpfprog.BTF(id)
	return b
}

// bpfImages emits a KSYMBOL, one page long, for each BPF trampoline and
// dispatcher of a kallsyms file, as perf's kallsyms_process_symbol does.
func (d *Assembler) bpfImages(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read BPF images: %w", err)
	}
	defer f.Close()
	syms, err := BPFImages(f)
	if err != nil {
		return fmt.Errorf("read BPF images from %s: %w", path, err)
	}
	for _, k := range syms {
		if err := d.emitKernel(k.Append(d.buf[:0], d.sampleType, d.sampleID(kernelPid, 0))); err != nil {
			return err
		}
	}
	return nil
}

// BPFImages returns the KSYMBOL records of the BPF trampolines
// ("bpf_trampoline_<key>") and dispatchers ("bpf_dispatcher_<name>") of
// kallsyms text, the symbols of its "[bpf]" module, in its order.
func BPFImages(r io.Reader) ([]perfdata.Ksymbol, error) {
	page := uint32(os.Getpagesize())
	var syms []perfdata.Ksymbol
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Bytes()
		name, ok := bytes.CutSuffix(line, []byte("\t[bpf]"))
		if !ok {
			continue
		}
		f := bytes.Fields(name)
		if len(f) != 3 || !isBPFImage(f[2]) {
			continue
		}
		addr, err := strconv.ParseUint(string(f[0]), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		syms = append(syms, perfdata.Ksymbol{Addr: addr, Len: page, Type: perfdata.KsymbolTypeBPF, Name: string(f[2])})
	}
	return syms, sc.Err()
}

// isBPFImage matches perf's sscanf of "bpf_trampoline_%lu" (a number
// follows) and "bpf_dispatcher_%s" (anything follows).
func isBPFImage(name []byte) bool {
	if rest, ok := bytes.CutPrefix(name, []byte("bpf_trampoline_")); ok {
		return len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9'
	}
	rest, ok := bytes.CutPrefix(name, []byte("bpf_dispatcher_"))
	return ok && len(rest) > 0
}
