package assemble

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/synth-dev/synth/perfdata"
)

// Gate is the vsyscall page. /proc/PID/maps lists it for every 64-bit
// process (fs/proc/task_mmu.c, via get_gate_vma()), but it is not in any
// mm's VMA tree, so no VMA iterator sees it: the dump adds it to every
// process the way /proc reports it. It is read once from /proc/self/maps;
// it is the same for all 64-bit processes.
type Gate struct {
	Start, End uint64
	Prot       uint32
}

// Values of PROT_* and MAP_* (include/uapi/asm-generic/mman-common.h).
const (
	protRead   = 1
	protWrite  = 2
	protExec   = 4
	mapShared  = 1
	mapPrivate = 2
	GateName   = "[vsyscall]"
)

// FindGate returns the gate area of this process, or nil when the
// kernel has none (vsyscall=none).
func FindGate() (*Gate, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("find gate area: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 8192), 64<<10)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasSuffix(line, []byte(" "+GateName)) {
			continue
		}
		return parseGateLine(line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("find gate area: %w", err)
	}
	return nil, nil
}

// parseGateLine reads "start-end perms ..." from a maps line.
func parseGateLine(line []byte) (*Gate, error) {
	fields := bytes.Fields(line)
	if len(fields) < 2 {
		return nil, fmt.Errorf("find gate area: malformed line %q", line)
	}
	lo, hi, ok := bytes.Cut(fields[0], []byte("-"))
	start, err1 := strconv.ParseUint(string(lo), 16, 64)
	end, err2 := strconv.ParseUint(string(hi), 16, 64)
	if !ok || err1 != nil || err2 != nil || end <= start || len(fields[1]) < 3 {
		return nil, fmt.Errorf("find gate area: malformed line %q", line)
	}
	g := &Gate{Start: start, End: end}
	perms := fields[1]
	if perms[0] == 'r' {
		g.Prot |= protRead
	}
	if perms[1] == 'w' {
		g.Prot |= protWrite
	}
	if perms[2] == 'x' {
		g.Prot |= protExec
	}
	return g, nil
}

// append encodes the gate area of process pid as an MMAP2 record.
func (g *Gate) append(b []byte, sampleType uint64, sid *perfdata.SampleID) []byte {
	pid := sid.Pid
	m := perfdata.Mmap2{
		Misc:     perfdata.MiscUser,
		Pid:      pid,
		Tid:      pid,
		Addr:     g.Start,
		Len:      g.End - g.Start,
		Prot:     g.Prot,
		Flags:    mapPrivate,
		Filename: GateName,
	}
	if g.Prot&protExec == 0 {
		m.Misc |= perfdata.MiscMmapData
	}
	return m.Append(b, sampleType, sid)
}
