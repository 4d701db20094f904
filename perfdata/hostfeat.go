package perfdata

// The feature sections that describe the recording host, as
// tools/perf/util/header.c writes them. perfdata only encodes them: what
// a host says is read elsewhere (synth reads /proc and /sys), so that
// the package builds, and reads perf.data, on any system.

// TotalMemFeature is HEADER_TOTAL_MEM: u64 MemTotal in kB.
func TotalMemFeature(kb uint64) Feature {
	return Feature{ID: FeatTotalMem, Data: le.AppendUint64(nil, kb)}
}

// CPUTopology is HEADER_CPU_TOPOLOGY (struct cpu_topology of
// tools/perf/util/cputopo.h, as write_cpu_topology writes it).
type CPUTopology struct {
	PackageCPUs []string // the distinct package sibling lists ("0-3")
	CoreCPUs    []string // the distinct thread sibling lists
	// CPUs holds the core and socket id of every available CPU.
	CPUs []CPUTopologyIDs
	// DieCPUs, the distinct die sibling lists, and the CPUs' die ids
	// (DieIDs, one per entry of CPUs) are written where the kernel
	// has dies (x86, s390); empty DieCPUs leaves them out.
	DieCPUs []string
	DieIDs  []int32
}

// CPUTopologyIDs are one CPU's core and socket (physical package) ids,
// -1 where the host does not say.
type CPUTopologyIDs struct {
	Core, Socket int32
}

// Feature encodes t: the package and thread sibling lists, the core and
// socket id of every CPU, then the die lists and ids if there are any.
func (t CPUTopology) Feature() Feature {
	b := appendStrings(nil, t.PackageCPUs)
	b = appendStrings(b, t.CoreCPUs)
	for _, c := range t.CPUs {
		b = le.AppendUint32(le.AppendUint32(b, uint32(c.Core)), uint32(c.Socket))
	}
	if len(t.DieCPUs) > 0 {
		b = appendStrings(b, t.DieCPUs)
		for _, id := range t.DieIDs {
			b = le.AppendUint32(b, uint32(id))
		}
	}
	return Feature{ID: FeatCPUTopology, Data: b}
}

// appendStrings appends u32 nr, then nr perf strings.
func appendStrings(b []byte, list []string) []byte {
	b = le.AppendUint32(b, uint32(len(list)))
	for _, s := range list {
		b = appendPerfString(b, s)
	}
	return b
}

// NUMANode is one node of HEADER_NUMA_TOPOLOGY.
type NUMANode struct {
	ID              uint32
	TotalKB, FreeKB uint64
	CPUs            string // its cpu list ("0-3")
}

// NUMATopologyFeature is HEADER_NUMA_TOPOLOGY: u32 nr, then per node
// u32 id, u64 total and free memory in kB, its cpu list.
func NUMATopologyFeature(nodes []NUMANode) Feature {
	b := le.AppendUint32(nil, uint32(len(nodes)))
	for _, n := range nodes {
		b = le.AppendUint64(le.AppendUint64(le.AppendUint32(b, n.ID), n.TotalKB), n.FreeKB)
		b = appendPerfString(b, n.CPUs)
	}
	return Feature{ID: FeatNUMATopology, Data: b}
}

// PMU is one entry of HEADER_PMU_MAPPINGS: a PMU's perf_event_attr type
// and its name.
type PMU struct {
	Type uint32
	Name string
}

// PMUMappingsFeature is HEADER_PMU_MAPPINGS: u32 nr, then per PMU u32
// type and its name.
func PMUMappingsFeature(pmus []PMU) Feature {
	b := le.AppendUint32(nil, uint32(len(pmus)))
	for _, p := range pmus {
		b = appendPerfString(le.AppendUint32(b, p.Type), p.Name)
	}
	return Feature{ID: FeatPMUMappings, Data: b}
}

// PMUCaps are the capabilities of one PMU (its sysfs caps directory),
// for HEADER_PMU_CAPS.
type PMUCaps struct {
	PMU  string
	Caps []PMUCap
}

// PMUCap is one capability: a file of the caps directory and its
// content.
type PMUCap struct {
	Name, Value string
}

// PMUCapsFeature is HEADER_PMU_CAPS: u32 nr, then per PMU u32 nr_caps,
// the caps' name and value strings, and the PMU's name.
func PMUCapsFeature(pmus []PMUCaps) Feature {
	b := le.AppendUint32(nil, uint32(len(pmus)))
	for _, p := range pmus {
		b = le.AppendUint32(b, uint32(len(p.Caps)))
		for _, c := range p.Caps {
			b = appendPerfString(appendPerfString(b, c.Name), c.Value)
		}
		b = appendPerfString(b, p.PMU)
	}
	return Feature{ID: FeatPMUCaps, Data: b}
}

// CacheLevel is struct cpu_cache_level of tools/perf/util/header.h: one
// CPU cache, as sysfs's cache/indexN directory describes it.
type CacheLevel struct {
	Level, LineSize, Sets, Ways int32
	Type, Size, SharedCPUs      string
}

// CacheFeature is HEADER_CACHE, version 1: u32 version, u32 nr, then
// the caches. perf writes them by level; so does the caller.
func CacheFeature(caches []CacheLevel) Feature {
	b := le.AppendUint32(le.AppendUint32(nil, 1), uint32(len(caches)))
	for _, c := range caches {
		for _, v := range []int32{c.Level, c.LineSize, c.Sets, c.Ways} {
			b = le.AppendUint32(b, uint32(v))
		}
		b = appendPerfString(appendPerfString(appendPerfString(b, c.Type), c.Size), c.SharedCPUs)
	}
	return Feature{ID: FeatCache, Data: b}
}

// MemNode is one node of HEADER_MEM_TOPOLOGY: its id and the numbers of
// its memory blocks.
type MemNode struct {
	ID     uint64
	Blocks []uint64
}

// MaxMemoryBlock bounds the block numbers MemTopologyFeature takes (and
// so the bitmaps it allocates): a greater one is left out.
const MaxMemoryBlock = 1 << 24

// MemTopologyFeature is HEADER_MEM_TOPOLOGY, version 1: u64 version,
// block size and nr, then per node u64 id, u64 size (the bitmap's bits)
// and the bitmap of its blocks in u64 words.
func MemTopologyFeature(blockSize uint64, nodes []MemNode) Feature {
	b := le.AppendUint64(le.AppendUint64(le.AppendUint64(nil, 1), blockSize), uint64(len(nodes)))
	for _, n := range nodes {
		size := uint64(1)
		for _, m := range n.Blocks {
			if m < MaxMemoryBlock {
				size = max(size, m+1)
			}
		}
		words := make([]uint64, (size+63)/64)
		for _, m := range n.Blocks {
			if m < MaxMemoryBlock {
				words[m/64] |= 1 << (m % 64)
			}
		}
		b = le.AppendUint64(le.AppendUint64(le.AppendUint64(b, n.ID), size), size)
		for _, w := range words {
			b = le.AppendUint64(b, w)
		}
	}
	return Feature{ID: FeatMemTopology, Data: b}
}

// ClockFeatures are HEADER_CLOCKID (the resolution of clockid, in ns)
// and HEADER_CLOCK_DATA (version 1, clockid, then the wall clock and
// clockid's clock read together, in ns): what perf record -k writes
// for attrs with use_clockid, and what lets perf script --ns and other
// readers map the records' times to the time of day.
func ClockFeatures(clockid int32, resNs, wallNs, clockNs uint64) []Feature {
	data := le.AppendUint32(le.AppendUint32(nil, 1), uint32(clockid))
	data = le.AppendUint64(le.AppendUint64(data, wallNs), clockNs)
	return []Feature{
		{ID: FeatClockID, Data: le.AppendUint64(nil, resNs)},
		{ID: FeatClockData, Data: data},
	}
}

// BTF is one BTF object of HEADER_BPF_BTF: its id and raw data.
type BTF struct {
	ID   uint32
	Data []byte
}

// BPFFeatures are HEADER_BPF_PROG_INFO and HEADER_BPF_BTF as perf writes
// them (write_bpf_prog_info, write_bpf_btf in tools/perf/util/header.c):
// a u32 count, then the entries. An entry of progs is a program as perf's
// struct perf_bpil lays it out; a BTF entry is u32 id, u32 size, then
// the data. perf keeps them in id order. With no programs and no BTF
// they are what perf writes for a recording without BPF programs.
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
