package perfhost

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// The host descriptions perf record writes besides the strings of
// Features, read from /proc and /sys as tools/perf/util/header.c and
// cputopo.c read them, and encoded by perfdata. Each returns false when
// the host does not say (a section perf would not write either).

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
func cpuDescFeature(info map[string]string) (perfdata.Feature, bool) {
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
		return perfdata.Feature{}, false
	}
	return perfdata.StringFeature(perfdata.FeatCPUDesc, strings.Join(strings.Fields(v), " ")), true
}

// cpuIDFeature is HEADER_CPUID as perf writes it: on x86
// "vendor,family,model,stepping", on arm64 the MIDR (armCPUID). Other
// architectures have formats of their own, which synth does not write.
func cpuIDFeature(info map[string]string, online []int) (perfdata.Feature, bool) {
	switch runtime.GOARCH {
	case "arm64":
		return armCPUID(sysfs+"/devices/system/cpu", online)
	case "amd64", "386":
	default:
		return perfdata.Feature{}, false
	}
	var parts []string
	for _, key := range []string{"vendor_id", "cpu family", "model", "stepping"} {
		v, ok := info[key]
		if !ok {
			return perfdata.Feature{}, false
		}
		parts = append(parts, v)
	}
	return perfdata.StringFeature(perfdata.FeatCPUID, strings.Join(parts, ",")), true
}

// MIDR_EL1 fields perf leaves out of the cpuid (arch/arm64/include/asm/cputype.h).
const (
	midrRevisionMask = 0xf
	midrVariantMask  = 0xf << 20
)

// armCPUID is HEADER_CPUID as perf writes it on arm64
// (tools/perf/arch/arm64/util/header.c): the MIDR_EL1 of the first online
// CPU that reports one under sysfs, without its variant and revision, as
// "0x%016x".
func armCPUID(sysCPU string, online []int) (perfdata.Feature, bool) {
	for _, cpu := range online {
		b, err := os.ReadFile(filepath.Join(sysCPU, fmt.Sprintf("cpu%d/regs/identification/midr_el1", cpu)))
		if err != nil {
			continue
		}
		midr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 64)
		if err != nil || midr == 0 {
			continue
		}
		midr &^= midrVariantMask | midrRevisionMask
		return perfdata.StringFeature(perfdata.FeatCPUID, fmt.Sprintf("0x%016x", midr)), true
	}
	return perfdata.Feature{}, false
}

// totalMemFeature is HEADER_TOTAL_MEM: u64 MemTotal in kB.
func totalMemFeature() (perfdata.Feature, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return perfdata.Feature{}, false
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
			return perfdata.TotalMemFeature(kb), true
		}
	}
	return perfdata.Feature{}, false
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
func cpuTopologyFeature(avail int, online []int) (perfdata.Feature, bool) {
	var t perfdata.CPUTopology
	dieList := filepath.Join(cpuDir(0), "topology/die_cpus_list")
	_, err := os.Stat(dieList)
	withDies := err == nil && (runtime.GOARCH == "amd64" || runtime.GOARCH == "386" || runtime.GOARCH == "s390x")
	for _, cpu := range online {
		dir := filepath.Join(cpuDir(cpu), "topology")
		s, ok := firstOf(dir, "package_cpus_list", "core_siblings_list")
		if !ok {
			return perfdata.Feature{}, false
		}
		t.PackageCPUs = addUnique(t.PackageCPUs, s)
		if withDies {
			if s, ok := readTrim(filepath.Join(dir, "die_cpus_list")); ok {
				t.DieCPUs = addUnique(t.DieCPUs, s)
			}
		}
		if s, ok := firstOf(dir, "core_cpus_list", "thread_siblings_list"); ok {
			t.CoreCPUs = addUnique(t.CoreCPUs, s)
		}
	}
	for cpu := range avail {
		dir := filepath.Join(cpuDir(cpu), "topology")
		t.CPUs = append(t.CPUs, perfdata.CPUTopologyIDs{
			Core:   readInt(filepath.Join(dir, "core_id"), -1),
			Socket: readInt(filepath.Join(dir, "physical_package_id"), -1),
		})
		if len(t.DieCPUs) > 0 {
			t.DieIDs = append(t.DieIDs, readInt(filepath.Join(dir, "die_id"), -1))
		}
	}
	return t.Feature(), true
}

// numaTopologyFeature is HEADER_NUMA_TOPOLOGY: each online node's
// memory and cpu list.
func numaTopologyFeature() (perfdata.Feature, bool) {
	s, ok := readTrim(filepath.Join(sysfs, "devices/system/node/online"))
	if !ok {
		return perfdata.Feature{}, false
	}
	ids, err := procfs.CPUList(s)
	if err != nil {
		return perfdata.Feature{}, false
	}
	var nodes []perfdata.NUMANode
	for _, n := range ids {
		dir := filepath.Join(sysfs, "devices/system/node", "node"+strconv.Itoa(n))
		total, free := nodeMem(filepath.Join(dir, "meminfo"))
		cpus, _ := readTrim(filepath.Join(dir, "cpulist"))
		nodes = append(nodes, perfdata.NUMANode{ID: uint32(n), TotalKB: total, FreeKB: free, CPUs: cpus})
	}
	return perfdata.NUMATopologyFeature(nodes), true
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

// pmuMappingsFeature is HEADER_PMU_MAPPINGS: every PMU's type and name.
func pmuMappingsFeature() (perfdata.Feature, bool) {
	var pmus []perfdata.PMU
	for _, name := range pmuDirs() {
		t := readInt(filepath.Join(sysfs, "bus/event_source/devices", name, "type"), -1)
		if t >= 0 {
			pmus = append(pmus, perfdata.PMU{Type: uint32(t), Name: name})
		}
	}
	if len(pmus) == 0 {
		return perfdata.Feature{}, false
	}
	return perfdata.PMUMappingsFeature(pmus), true
}

// pmuCapsFeature is HEADER_PMU_CAPS: the capabilities of each PMU other
// than "cpu" that has any.
func pmuCapsFeature() perfdata.Feature {
	var pmus []perfdata.PMUCaps
	for _, name := range pmuDirs() {
		if name == "cpu" {
			continue // perf writes its caps as CPU_PMU_CAPS
		}
		dir := filepath.Join(sysfs, "bus/event_source/devices", name, "caps")
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) == 0 {
			continue
		}
		p := perfdata.PMUCaps{PMU: name}
		for _, e := range ents {
			v, _ := readTrim(filepath.Join(dir, e.Name()))
			p.Caps = append(p.Caps, perfdata.PMUCap{Name: e.Name(), Value: v})
		}
		pmus = append(pmus, p)
	}
	return perfdata.PMUCapsFeature(pmus)
}

// cacheFeature is HEADER_CACHE: the distinct caches of the possible
// CPUs, by level. Without cache directories in sysfs (some VMs) it holds
// none, as perf's write_cache writes it then.
func cacheFeature(possible int) (perfdata.Feature, bool) {
	var caches []perfdata.CacheLevel
	for cpu := range possible {
		for idx := range 4 { // MAX_CACHE_LVL
			dir := filepath.Join(cpuDir(cpu), "cache", "index"+strconv.Itoa(idx))
			if _, err := os.Stat(dir); err != nil {
				break
			}
			c := perfdata.CacheLevel{
				Level:    readInt(filepath.Join(dir, "level"), 0),
				LineSize: readInt(filepath.Join(dir, "coherency_line_size"), 0),
				Sets:     readInt(filepath.Join(dir, "number_of_sets"), 0),
				Ways:     readInt(filepath.Join(dir, "ways_of_associativity"), 0),
			}
			c.Type, _ = readTrim(filepath.Join(dir, "type"))
			c.Size, _ = readTrim(filepath.Join(dir, "size"))
			c.SharedCPUs, _ = readTrim(filepath.Join(dir, "shared_cpu_list"))
			if !slices.Contains(caches, c) {
				caches = append(caches, c)
			}
		}
	}
	slices.SortStableFunc(caches, func(a, b perfdata.CacheLevel) int { return int(a.Level - b.Level) })
	return perfdata.CacheFeature(caches), true
}

// memTopologyFeature is HEADER_MEM_TOPOLOGY: the memory block size and
// each node's blocks.
func memTopologyFeature() (perfdata.Feature, bool) {
	bs, ok := readTrim(filepath.Join(sysfs, "devices/system/memory/block_size_bytes"))
	if !ok {
		return perfdata.Feature{}, false
	}
	bsize, err := strconv.ParseUint(bs, 16, 64)
	if err != nil {
		return perfdata.Feature{}, false
	}
	nodeDir := filepath.Join(sysfs, "devices/system/node")
	ents, err := os.ReadDir(nodeDir)
	if err != nil {
		return perfdata.Feature{}, false
	}
	var nodes []perfdata.MemNode
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "node")
		if n, err := strconv.ParseUint(rest, 10, 64); ok && err == nil {
			nodes = append(nodes, perfdata.MemNode{ID: n, Blocks: nodeBlocks(filepath.Join(nodeDir, e.Name()))})
		}
	}
	slices.SortFunc(nodes, func(a, b perfdata.MemNode) int { return cmp.Compare(a.ID, b.ID) })
	return perfdata.MemTopologyFeature(bsize, nodes), true
}

// nodeBlocks lists the memory blocks (memoryN entries) of a node.
func nodeBlocks(dir string) []uint64 {
	ents, _ := os.ReadDir(dir)
	var out []uint64
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), "memory"); ok {
			if m, err := strconv.ParseUint(rest, 10, 64); err == nil && m < perfdata.MaxMemoryBlock {
				out = append(out, m)
			}
		}
	}
	return out
}
