package perfdata

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/synth-dev/synth/internal/procfs"
	"golang.org/x/sys/unix"
)

// Feature is one feature section: its id (Feat*) and its body, encoded
// as in a perf.data file (tools/perf/util/header.c).
type Feature struct {
	ID   int
	Data []byte
}

// nameAlign is NAME_ALIGN of tools/perf/util/header.h: perf strings and
// build-id file names are padded to it.
const nameAlign = 64

// appendPerfString appends struct perf_header_string: u32 len, then the
// string NUL-padded to len, len a multiple of 64 that holds the NUL.
func appendPerfString(b []byte, s string) []byte {
	n := (len(s) + 1 + nameAlign - 1) / nameAlign * nameAlign
	b = le.AppendUint32(b, uint32(n))
	b = append(b, s...)
	return append(b, make([]byte, n-len(s))...)
}

// StringFeature is a feature whose body is one perf string (HOSTNAME,
// OSRELEASE, VERSION, ARCH, CPUDESC, CPUID).
func StringFeature(id int, s string) Feature {
	return Feature{ID: id, Data: appendPerfString(nil, s)}
}

// NrCPUsFeature is HEADER_NRCPUS: u32 nr_cpus_avail, u32 nr_cpus_online.
func NrCPUsFeature(avail, online uint32) Feature {
	return Feature{ID: FeatNrCPUs, Data: le.AppendUint32(le.AppendUint32(nil, avail), online)}
}

// CmdlineFeature is HEADER_CMDLINE: u32 nr, then nr perf strings.
func CmdlineFeature(args []string) Feature {
	b := le.AppendUint32(nil, uint32(len(args)))
	for _, a := range args {
		b = appendPerfString(b, a)
	}
	return Feature{ID: FeatCmdline, Data: b}
}

// EventDesc describes one event for HEADER_EVENT_DESC.
type EventDesc struct {
	Attr Attr
	Name string
	IDs  []uint64
}

// EventDescFeature is HEADER_EVENT_DESC: u32 nr, u32 attr_size, then per
// event: attr, u32 nr_ids, perf string name, u64 ids[nr_ids].
func EventDescFeature(descs []EventDesc) Feature {
	b := le.AppendUint32(nil, uint32(len(descs)))
	b = le.AppendUint32(b, AttrSize)
	for _, d := range descs {
		b = d.Attr.Append(b)
		b = le.AppendUint32(b, uint32(len(d.IDs)))
		b = appendPerfString(b, d.Name)
		for _, id := range d.IDs {
			b = le.AppendUint64(b, id)
		}
	}
	return Feature{ID: FeatEventDesc, Data: b}
}

// HostFeatures describes this host as perf record 6.1 does: HOSTNAME,
// OSRELEASE, VERSION (synth's module version, where perf writes its
// own), ARCH, NRCPUS, CPUDESC, CPUID, TOTAL_MEM, CMDLINE, CPU_TOPOLOGY,
// NUMA_TOPOLOGY, PMU_MAPPINGS, CACHE, MEM_TOPOLOGY, PMU_CAPS, and
// BPF_PROG_INFO and BPF_BTF (empty). A section the host gives no data
// for is left out, as perf leaves it out. The Writer adds EVENT_DESC,
// SAMPLE_TIME, and CLOCKID and CLOCK_DATA for attrs with use_clockid.
func HostFeatures(cmdline []string) []Feature {
	var uts unix.Utsname
	_ = unix.Uname(&uts) // cannot fail; zero fields read as ""
	host, _ := os.Hostname()
	cpuSys := sysfs + "/devices/system/cpu/"
	s, _ := readTrim(cpuSys + "online")
	online, err := procfs.CPUList(s)
	if err != nil {
		online, _ = procfs.CPUList("0-" + strconv.Itoa(runtime.NumCPU()-1))
	}
	avail := max(countCPUs(cpuSys+"present", len(online)), len(online))
	possible := max(countCPUs(cpuSys+"possible", avail), avail)
	fs := []Feature{
		StringFeature(FeatHostname, host),
		StringFeature(FeatOSRelease, unix.ByteSliceToString(uts.Release[:])),
		StringFeature(FeatVersion, version()),
		StringFeature(FeatArch, unix.ByteSliceToString(uts.Machine[:])),
		NrCPUsFeature(uint32(avail), uint32(len(online))),
		CmdlineFeature(cmdline),
	}
	info := cpuinfo()
	for _, f := range []func() (Feature, bool){
		func() (Feature, bool) { return cpuDescFeature(info) },
		func() (Feature, bool) { return cpuIDFeature(info) },
		totalMemFeature,
		func() (Feature, bool) { return cpuTopologyFeature(avail, online) },
		numaTopologyFeature, pmuMappingsFeature,
		func() (Feature, bool) { return cacheFeature(possible) },
		memTopologyFeature,
	} {
		if feat, ok := f(); ok {
			fs = append(fs, feat)
		}
	}
	return append(append(fs, pmuCapsFeature()), emptyBPFFeatures()...)
}

// version is the synth module's version, as the VERSION feature.
func version() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return "synth " + v
}

// countCPUs counts the CPUs of a sysfs cpu list ("0-3,5"), or returns def.
func countCPUs(path string, def int) int {
	s, ok := readTrim(path)
	if !ok {
		return def
	}
	cpus, err := procfs.CPUList(s)
	if err != nil || len(cpus) == 0 {
		return def
	}
	return len(cpus)
}
