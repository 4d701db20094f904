package perfhost

import (
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// Features describes this host as perf record 6.1 does: HOSTNAME,
// OSRELEASE, VERSION (synth's module version, where perf writes its
// own), ARCH, NRCPUS, CPUDESC, CPUID, TOTAL_MEM, CMDLINE, CPU_TOPOLOGY,
// NUMA_TOPOLOGY, PMU_MAPPINGS, CACHE, MEM_TOPOLOGY, PMU_CAPS, and
// BPF_PROG_INFO and BPF_BTF (empty). A section the host gives no data
// for is left out, as perf leaves it out. The perfdata.Writer adds
// EVENT_DESC and SAMPLE_TIME; WithClock adds CLOCKID and CLOCK_DATA.
func Features(cmdline []string) []perfdata.Feature {
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
	fs := []perfdata.Feature{
		perfdata.StringFeature(perfdata.FeatHostname, host),
		perfdata.StringFeature(perfdata.FeatOSRelease, unix.ByteSliceToString(uts.Release[:])),
		perfdata.StringFeature(perfdata.FeatVersion, version()),
		perfdata.StringFeature(perfdata.FeatArch, unix.ByteSliceToString(uts.Machine[:])),
		perfdata.NrCPUsFeature(uint32(avail), uint32(len(online))),
		perfdata.CmdlineFeature(cmdline),
	}
	info := cpuinfo()
	for _, f := range []func() (perfdata.Feature, bool){
		func() (perfdata.Feature, bool) { return cpuDescFeature(info) },
		func() (perfdata.Feature, bool) { return cpuIDFeature(info, online) },
		totalMemFeature,
		func() (perfdata.Feature, bool) { return cpuTopologyFeature(avail, online) },
		numaTopologyFeature, pmuMappingsFeature,
		func() (perfdata.Feature, bool) { return cacheFeature(possible) },
		memTopologyFeature,
	} {
		if feat, ok := f(); ok {
			fs = append(fs, feat)
		}
	}
	return append(append(fs, pmuCapsFeature()), perfdata.BPFFeatures(nil, nil)...)
}

// WithClock returns feats with CLOCKID and CLOCK_DATA for the clock of
// the first attr that sets use_clockid, read now, unless feats has them
// or no attr uses a clock id.
func WithClock(feats []perfdata.Feature, attrs []perfdata.EventAttr) []perfdata.Feature {
	i := slices.IndexFunc(attrs, func(a perfdata.EventAttr) bool { return a.Attr.Flags&perfdata.AttrUseClockID != 0 })
	if i < 0 || slices.ContainsFunc(feats, func(f perfdata.Feature) bool { return f.ID == perfdata.FeatClockID }) {
		return feats
	}
	return append(feats, ClockFeatures(attrs[i].Attr.ClockID)...)
}

// ClockFeatures are perfdata.ClockFeatures for clockid as this host's
// clocks read now.
func ClockFeatures(clockid int32) []perfdata.Feature {
	var res, wall, clk unix.Timespec
	if unix.ClockGetres(clockid, &res) != nil {
		res = unix.Timespec{Nsec: 1}
	}
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &wall)
	_ = unix.ClockGettime(clockid, &clk)
	return perfdata.ClockFeatures(clockid, uint64(res.Nano()), uint64(wall.Nano()), uint64(clk.Nano()))
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
