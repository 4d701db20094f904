package perfdata

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/synth-dev/synth/internal/procfs"
	"golang.org/x/sys/unix"
)

// The host descriptions perf record writes besides the strings of
// HostFeatures, read from /proc and /sys as tools/perf/util/header.c
// and cputopo.c read them. Each returns false when the host does not
// say (a section perf would not write either).

// sysfs is where the host descriptions are read.
const sysfs = "/sys"

// readTrim reads a small sysfs or procfs file without its trailing
// newline.
func readTrim(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// cpuinfo returns the "key : value" lines of /proc/cpuinfo, the first
// value of each key (the first CPU's), read once for every section.
func cpuinfo() map[string]string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	info := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if k = strings.TrimSpace(k); ok && info[k] == "" {
			info[k] = strings.TrimSpace(v)
		}
	}
	return info
}

// cpuDescFeature is HEADER_CPUDESC: the model name, with runs of
// spaces squashed as perf squashes them.
func cpuDescFeature(info map[string]string) (Feature, bool) {
	key := "model name"
	switch runtime.GOARCH {
	case "ppc64", "ppc64le", "sparc64":
		key = "cpu"
	case "s390x":
		key = "vendor_id"
	case "mips", "mipsle", "mips64", "mips64le":
		key = "cpu model"
	}
	v, ok := info[key]
	if !ok {
		return Feature{}, false
	}
	return StringFeature(FeatCPUDesc, strings.Join(strings.Fields(v), " ")), true
}

// cpuIDFeature is HEADER_CPUID as perf writes it on x86:
// "vendor,family,model,stepping". Other architectures have formats of
// their own, which synth does not write.
func cpuIDFeature(info map[string]string) (Feature, bool) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
		return Feature{}, false
	}
	var parts []string
	for _, key := range []string{"vendor_id", "cpu family", "model", "stepping"} {
		v, ok := info[key]
		if !ok {
			return Feature{}, false
		}
		parts = append(parts, v)
	}
	return StringFeature(FeatCPUID, strings.Join(parts, ",")), true
}

// totalMemFeature is HEADER_TOTAL_MEM: u64 MemTotal in kB.
func totalMemFeature() (Feature, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return Feature{}, false
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				break
			}
			return Feature{ID: FeatTotalMem, Data: le.AppendUint64(nil, kb)}, true
		}
	}
	return Feature{}, false
}

// cpuDir is the sysfs directory of one CPU.
func cpuDir(cpu int) string {
	return filepath.Join(sysfs, "devices/system/cpu", "cpu"+strconv.Itoa(cpu))
}

// readInt reads a sysfs integer, or returns def.
func readInt(path string, def int32) int32 {
	s, ok := readTrim(path)
	if !ok {
		return def
	}
	v, err := strconv.ParseInt(s, 0, 32)
	if err != nil {
		return def
	}
	return int32(v)
}

// firstOf reads the first of the files in dir that exists.
func firstOf(dir string, names ...string) (string, bool) {
	for _, n := range names {
		if s, ok := readTrim(filepath.Join(dir, n)); ok {
			return s, true
		}
	}
	return "", false
}

// addUnique appends s to list unless it is there.
func addUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// cpuTopologyFeature is HEADER_CPU_TOPOLOGY for the avail present CPUs:
// the distinct package and thread sibling lists of the online CPUs, the
// core and socket id of every CPU, then, where the kernel has dies (x86,
// s390), the die sibling lists and die ids.
func cpuTopologyFeature(avail int, online []int) (Feature, bool) {
	var pkgs, dies, threads []string
	dieList := filepath.Join(cpuDir(0), "topology/die_cpus_list")
	_, err := os.Stat(dieList)
	withDies := err == nil && (runtime.GOARCH == "amd64" || runtime.GOARCH == "386" || runtime.GOARCH == "s390x")
	for _, cpu := range online {
		dir := filepath.Join(cpuDir(cpu), "topology")
		s, ok := firstOf(dir, "package_cpus_list", "core_siblings_list")
		if !ok {
			return Feature{}, false
		}
		pkgs = addUnique(pkgs, s)
		if withDies {
			if s, ok := readTrim(filepath.Join(dir, "die_cpus_list")); ok {
				dies = addUnique(dies, s)
			}
		}
		if s, ok := firstOf(dir, "core_cpus_list", "thread_siblings_list"); ok {
			threads = addUnique(threads, s)
		}
	}
	b := appendStrings(nil, pkgs)
	b = appendStrings(b, threads)
	for cpu := range avail {
		dir := filepath.Join(cpuDir(cpu), "topology")
		b = le.AppendUint32(b, uint32(readInt(filepath.Join(dir, "core_id"), -1)))
		b = le.AppendUint32(b, uint32(readInt(filepath.Join(dir, "physical_package_id"), -1)))
	}
	if withDies && len(dies) > 0 {
		b = appendStrings(b, dies)
		for cpu := range avail {
			b = le.AppendUint32(b, uint32(readInt(filepath.Join(cpuDir(cpu), "topology/die_id"), -1)))
		}
	}
	return Feature{ID: FeatCPUTopology, Data: b}, true
}

// appendStrings appends u32 nr, then nr perf strings.
func appendStrings(b []byte, list []string) []byte {
	b = le.AppendUint32(b, uint32(len(list)))
	for _, s := range list {
		b = appendPerfString(b, s)
	}
	return b
}

// numaTopologyFeature is HEADER_NUMA_TOPOLOGY: u32 nr, then per online
// node u32 id, u64 total and free memory in kB, its cpu list.
func numaTopologyFeature() (Feature, bool) {
	s, ok := readTrim(filepath.Join(sysfs, "devices/system/node/online"))
	if !ok {
		return Feature{}, false
	}
	nodes, err := procfs.CPUList(s)
	if err != nil {
		return Feature{}, false
	}
	b := le.AppendUint32(nil, uint32(len(nodes)))
	for _, n := range nodes {
		dir := filepath.Join(sysfs, "devices/system/node", "node"+strconv.Itoa(n))
		total, free := nodeMem(filepath.Join(dir, "meminfo"))
		cpus, _ := readTrim(filepath.Join(dir, "cpulist"))
		b = le.AppendUint32(b, uint32(n))
		b = le.AppendUint64(b, total)
		b = le.AppendUint64(b, free)
		b = appendPerfString(b, cpus)
	}
	return Feature{ID: FeatNUMATopology, Data: b}, true
}

// nodeMem reads MemTotal and MemFree (kB) of a node's meminfo, lines of
// the form "Node 0 MemTotal:  1024 kB".
func nodeMem(path string) (total, free uint64) {
	b, _ := os.ReadFile(path)
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		v, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			continue
		}
		switch f[2] {
		case "MemTotal:":
			total = v
		case "MemFree:":
			free = v
		}
	}
	return total, free
}

// pmuDirs lists the PMUs in the order the directory holds them, as
// perf scans them.
func pmuDirs() []string {
	f, err := os.Open(filepath.Join(sysfs, "bus/event_source/devices"))
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return names
}

// pmuMappingsFeature is HEADER_PMU_MAPPINGS: u32 nr, then per PMU u32
// type and its name.
func pmuMappingsFeature() (Feature, bool) {
	var b []byte
	n := 0
	for _, name := range pmuDirs() {
		t := readInt(filepath.Join(sysfs, "bus/event_source/devices", name, "type"), -1)
		if t < 0 {
			continue
		}
		b = le.AppendUint32(b, uint32(t))
		b = appendPerfString(b, name)
		n++
	}
	if n == 0 {
		return Feature{}, false
	}
	return Feature{ID: FeatPMUMappings, Data: append(le.AppendUint32(nil, uint32(n)), b...)}, true
}

// pmuCapsFeature is HEADER_PMU_CAPS: u32 nr, then per PMU other than
// "cpu" that has capabilities: u32 nr_caps, name and value strings, the
// PMU's name.
func pmuCapsFeature() Feature {
	var b []byte
	n := 0
	for _, name := range pmuDirs() {
		if name == "cpu" {
			continue // perf writes its caps as CPU_PMU_CAPS
		}
		dir := filepath.Join(sysfs, "bus/event_source/devices", name, "caps")
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) == 0 {
			continue
		}
		b = le.AppendUint32(b, uint32(len(ents)))
		for _, e := range ents {
			v, _ := readTrim(filepath.Join(dir, e.Name()))
			b = appendPerfString(appendPerfString(b, e.Name()), v)
		}
		b = appendPerfString(b, name)
		n++
	}
	return Feature{ID: FeatPMUCaps, Data: append(le.AppendUint32(nil, uint32(n)), b...)}
}

// cacheLevel is struct cpu_cache_level of tools/perf/util/header.h.
type cacheLevel struct {
	level, lineSize, sets, ways int32
	typ, size, shared           string
}

// cacheFeature is HEADER_CACHE, version 1: the distinct caches of the
// possible CPUs, by level. Without cache directories in sysfs (some VMs)
// it holds none, as perf's write_cache writes it then.
func cacheFeature(possible int) (Feature, bool) {
	var caches []cacheLevel
	for cpu := range possible {
		for idx := range 4 { // MAX_CACHE_LVL
			dir := filepath.Join(cpuDir(cpu), "cache", "index"+strconv.Itoa(idx))
			if _, err := os.Stat(dir); err != nil {
				break
			}
			c := cacheLevel{
				level:    readInt(filepath.Join(dir, "level"), 0),
				lineSize: readInt(filepath.Join(dir, "coherency_line_size"), 0),
				sets:     readInt(filepath.Join(dir, "number_of_sets"), 0),
				ways:     readInt(filepath.Join(dir, "ways_of_associativity"), 0),
			}
			c.typ, _ = readTrim(filepath.Join(dir, "type"))
			c.size, _ = readTrim(filepath.Join(dir, "size"))
			c.shared, _ = readTrim(filepath.Join(dir, "shared_cpu_list"))
			if !slices.Contains(caches, c) {
				caches = append(caches, c)
			}
		}
	}
	slices.SortStableFunc(caches, func(a, b cacheLevel) int { return int(a.level - b.level) })
	b := le.AppendUint32(le.AppendUint32(nil, 1), uint32(len(caches)))
	for _, c := range caches {
		for _, v := range []int32{c.level, c.lineSize, c.sets, c.ways} {
			b = le.AppendUint32(b, uint32(v))
		}
		b = appendPerfString(appendPerfString(appendPerfString(b, c.typ), c.size), c.shared)
	}
	return Feature{ID: FeatCache, Data: b}, true
}

// memTopologyFeature is HEADER_MEM_TOPOLOGY, version 1: the memory
// block size, then per node its id and the bitmap of its memory blocks
// (u64 bits, then the words).
func memTopologyFeature() (Feature, bool) {
	bs, ok := readTrim(filepath.Join(sysfs, "devices/system/memory/block_size_bytes"))
	if !ok {
		return Feature{}, false
	}
	bsize, err := strconv.ParseUint(bs, 16, 64)
	if err != nil {
		return Feature{}, false
	}
	nodeDir := filepath.Join(sysfs, "devices/system/node")
	ents, err := os.ReadDir(nodeDir)
	if err != nil {
		return Feature{}, false
	}
	var nodes []int
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node")); err == nil && strings.HasPrefix(e.Name(), "node") {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	b := le.AppendUint64(le.AppendUint64(le.AppendUint64(nil, 1), bsize), uint64(len(nodes)))
	for _, n := range nodes {
		blocks := nodeBlocks(filepath.Join(nodeDir, "node"+strconv.Itoa(n)))
		size := uint64(1)
		if len(blocks) > 0 {
			size = uint64(slices.Max(blocks)) + 1
		}
		words := make([]uint64, (size+63)/64)
		for _, m := range blocks {
			words[m/64] |= 1 << (m % 64)
		}
		b = le.AppendUint64(le.AppendUint64(le.AppendUint64(b, uint64(n)), size), size)
		for _, w := range words {
			b = le.AppendUint64(b, w)
		}
	}
	return Feature{ID: FeatMemTopology, Data: b}, true
}

// maxMemoryBlock bounds the memory block numbers nodeBlocks takes, and
// so the bitmap memTopologyFeature allocates.
const maxMemoryBlock = 1 << 24

// nodeBlocks lists the memory blocks (memoryN entries) of a node.
func nodeBlocks(dir string) []int {
	ents, _ := os.ReadDir(dir)
	var out []int
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), "memory"); ok {
			if m, err := strconv.Atoi(rest); err == nil && m >= 0 && m < maxMemoryBlock {
				out = append(out, m)
			}
		}
	}
	return out
}

// ClockFeatures are HEADER_CLOCKID (the resolution of clockid, in ns)
// and HEADER_CLOCK_DATA (version 1, clockid, then the wall clock and
// clockid read together, in ns): what perf record -k writes for attrs
// with use_clockid, and what lets perf script --ns --clock... and other
// readers map the records' times to the time of day.
func ClockFeatures(clockid int32) []Feature {
	var res, wall, clk unix.Timespec
	if unix.ClockGetres(clockid, &res) != nil {
		res = unix.Timespec{Nsec: 1}
	}
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &wall)
	_ = unix.ClockGettime(clockid, &clk)
	data := le.AppendUint32(le.AppendUint32(nil, 1), uint32(clockid))
	data = le.AppendUint64(le.AppendUint64(data, uint64(wall.Nano())), uint64(clk.Nano()))
	return []Feature{
		{ID: FeatClockID, Data: le.AppendUint64(nil, uint64(res.Nano()))},
		{ID: FeatClockData, Data: data},
	}
}

// emptyBPFFeatures are HEADER_BPF_PROG_INFO and HEADER_BPF_BTF with no
// entries, as perf writes them for a recording without BPF programs;
// BPFFeatures replaces them.
func emptyBPFFeatures() []Feature {
	return BPFFeatures(nil, nil)
}

// BTF is one BTF object of HEADER_BPF_BTF: its id and raw data.
type BTF struct {
	ID   uint32
	Data []byte
}

// BPFFeatures are HEADER_BPF_PROG_INFO and HEADER_BPF_BTF as perf writes
// them (write_bpf_prog_info, write_bpf_btf in tools/perf/util/header.c):
// a u32 count, then the entries. An entry of progs is a program as perf's
// struct perf_bpil lays it out (see bpfprog.Prog.AppendLinear); a BTF
// entry is u32 id, u32 size, then the data. perf keeps them in id order.
func BPFFeatures(progs [][]byte, btfs []BTF) []Feature {
	info := le.AppendUint32(nil, uint32(len(progs)))
	for _, p := range progs {
		info = append(info, p...)
	}
	b := le.AppendUint32(nil, uint32(len(btfs)))
	for _, t := range btfs {
		b = le.AppendUint32(le.AppendUint32(b, t.ID), uint32(len(t.Data)))
		b = append(b, t.Data...)
	}
	return []Feature{{ID: FeatBPFProgInfo, Data: info}, {ID: FeatBPFBTF, Data: b}}
}

// sampleTimeFeature is HEADER_SAMPLE_TIME: the times of the first and
// last sample, 0 when there were none.
func sampleTimeFeature(first, last uint64) Feature {
	return Feature{ID: FeatSampleTime, Data: le.AppendUint64(le.AppendUint64(nil, first), last)}
}
