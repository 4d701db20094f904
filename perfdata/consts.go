package perfdata

import "fmt"

// Record types (enum perf_event_type, include/uapi/linux/perf_event.h, and
// the user-space types of tools/lib/perf/include/perf/event.h).
const (
	RecordMmap              RecordType = 1
	RecordLost              RecordType = 2
	RecordComm              RecordType = 3
	RecordExit              RecordType = 4
	RecordThrottle          RecordType = 5
	RecordUnthrottle        RecordType = 6
	RecordFork              RecordType = 7
	RecordRead              RecordType = 8
	RecordSample            RecordType = 9
	RecordMmap2             RecordType = 10
	RecordAux               RecordType = 11
	RecordItraceStart       RecordType = 12
	RecordLostSamples       RecordType = 13
	RecordSwitch            RecordType = 14
	RecordSwitchCPUWide     RecordType = 15
	RecordNamespaces        RecordType = 16
	RecordKsymbol           RecordType = 17
	RecordBPFEvent          RecordType = 18
	RecordCgroup            RecordType = 19
	RecordTextPoke          RecordType = 20
	RecordAuxOutputHwID     RecordType = 21
	RecordHeaderAttr        RecordType = 64
	RecordHeaderEventType   RecordType = 65
	RecordHeaderTracingData RecordType = 66
	RecordHeaderBuildID     RecordType = 67
	RecordFinishedRound     RecordType = 68
	RecordIDIndex           RecordType = 69
	RecordAuxtraceInfo      RecordType = 70
	RecordAuxtrace          RecordType = 71
	RecordAuxtraceError     RecordType = 72
	RecordThreadMap         RecordType = 73
	RecordCPUMap            RecordType = 74
	RecordStatConfig        RecordType = 75
	RecordStat              RecordType = 76
	RecordStatRound         RecordType = 77
	RecordEventUpdate       RecordType = 78
	RecordTimeConv          RecordType = 79
	RecordHeaderFeature     RecordType = 80
	RecordCompressed        RecordType = 81
	RecordFinishedInit      RecordType = 82
)

// RecordType is the type of a record, perf_event_header.type.
type RecordType uint32

// The range of synth's private record types (enum synth_record_type in
// bpf/synth.h): records synth's BPF programs and Session emit among
// perf's, such as the unmap record of SessionOptions.Unmaps. No
// perf.data reader knows them (perf report stops at the first, "failed
// to process type"), so Writer refuses them.
const (
	RecordPrivateFirst RecordType = 0x5e00
	RecordPrivateLast  RecordType = 0x5eff
)

// Private reports whether t is in synth's private range.
func (t RecordType) Private() bool { return t >= RecordPrivateFirst && t <= RecordPrivateLast }

var recordNames = map[RecordType]string{
	RecordMmap: "MMAP", RecordLost: "LOST", RecordComm: "COMM", RecordExit: "EXIT",
	RecordThrottle: "THROTTLE", RecordUnthrottle: "UNTHROTTLE", RecordFork: "FORK",
	RecordRead: "READ", RecordSample: "SAMPLE", RecordMmap2: "MMAP2", RecordAux: "AUX",
	RecordItraceStart: "ITRACE_START", RecordLostSamples: "LOST_SAMPLES",
	RecordSwitch: "SWITCH", RecordSwitchCPUWide: "SWITCH_CPU_WIDE",
	RecordNamespaces: "NAMESPACES", RecordKsymbol: "KSYMBOL", RecordBPFEvent: "BPF_EVENT",
	RecordCgroup: "CGROUP", RecordTextPoke: "TEXT_POKE", RecordAuxOutputHwID: "AUX_OUTPUT_HW_ID",
	RecordHeaderAttr: "ATTR", RecordHeaderEventType: "EVENT_TYPE",
	RecordHeaderTracingData: "TRACING_DATA", RecordHeaderBuildID: "BUILD_ID",
	RecordFinishedRound: "FINISHED_ROUND", RecordIDIndex: "ID_INDEX",
	RecordAuxtraceInfo: "AUXTRACE_INFO", RecordAuxtrace: "AUXTRACE",
	RecordAuxtraceError: "AUXTRACE_ERROR", RecordThreadMap: "THREAD_MAP", RecordCPUMap: "CPU_MAP",
	RecordStatConfig: "STAT_CONFIG", RecordStat: "STAT", RecordStatRound: "STAT_ROUND",
	RecordEventUpdate: "EVENT_UPDATE", RecordTimeConv: "TIME_CONV", RecordHeaderFeature: "FEATURE",
	RecordCompressed: "COMPRESSED", RecordFinishedInit: "FINISHED_INIT",
}

// String returns the name perf gives the type after PERF_RECORD_, as
// perf report -D prints it, or "RecordType(N)" for one it does not know.
func (t RecordType) String() string {
	if n, ok := recordNames[t]; ok {
		return n
	}
	return fmt.Sprintf("RecordType(%d)", uint32(t))
}

// perf_event_header.misc bits.
const (
	MiscKernel      = 1 << 0
	MiscUser        = 1 << 1
	MiscMmapData    = 1 << 13 // on MMAP/MMAP2: not executable
	MiscCommExec    = 1 << 13 // on COMM: the name changed by exec
	MiscForkExec    = 1 << 13 // on FORK: synthesized for a running task (perf's marking)
	MiscMmapBuildID = 1 << 14 // on MMAP2: build-id form of the union
	MiscBuildIDSize = 1 << 15 // on HEADER_BUILD_ID: the size byte is valid
)

// perf_event_attr.sample_type bits (enum perf_event_sample_format).
const (
	SampleIP         = 1 << 0
	SampleTID        = 1 << 1
	SampleTime       = 1 << 2
	SampleAddr       = 1 << 3
	SampleRead       = 1 << 4
	SampleCallchain  = 1 << 5
	SampleTypeID     = 1 << 6 // PERF_SAMPLE_ID (SampleID is the trailer type)
	SampleCPU        = 1 << 7
	SamplePeriod     = 1 << 8
	SampleStreamID   = 1 << 9
	SampleRaw        = 1 << 10
	SampleIdentifier = 1 << 16
)

// perf_event_attr flag bits: the bitfield word after read_format.
const (
	AttrDisabled      = 1 << 0
	AttrInherit       = 1 << 1
	AttrExcludeUser   = 1 << 4
	AttrExcludeKernel = 1 << 5
	AttrExcludeHV     = 1 << 6
	AttrMmap          = 1 << 8
	AttrComm          = 1 << 9
	AttrFreq          = 1 << 10
	AttrEnableOnExec  = 1 << 12
	AttrTask          = 1 << 13
	AttrWatermark     = 1 << 14
	AttrMmapData      = 1 << 17
	AttrSampleIDAll   = 1 << 18
	AttrExcludeGuest  = 1 << 20
	AttrMmap2         = 1 << 23
	AttrCommExec      = 1 << 24
	AttrUseClockID    = 1 << 25
	AttrNamespaces    = 1 << 28
	AttrKsymbol       = 1 << 29
	AttrBPFEvent      = 1 << 30
	AttrCgroup        = 1 << 32
	AttrTextPoke      = 1 << 33
	AttrBuildID       = 1 << 34
)

// Feature section ids (tools/perf/util/header.h, perf 6.1).
const (
	FeatTracingData  FeatureID = 1
	FeatBuildID      FeatureID = 2
	FeatHostname     FeatureID = 3
	FeatOSRelease    FeatureID = 4
	FeatVersion      FeatureID = 5
	FeatArch         FeatureID = 6
	FeatNrCPUs       FeatureID = 7
	FeatCPUDesc      FeatureID = 8
	FeatCPUID        FeatureID = 9
	FeatTotalMem     FeatureID = 10
	FeatCmdline      FeatureID = 11
	FeatEventDesc    FeatureID = 12
	FeatCPUTopology  FeatureID = 13
	FeatNUMATopology FeatureID = 14
	FeatPMUMappings  FeatureID = 16
	FeatCache        FeatureID = 20
	FeatSampleTime   FeatureID = 21
	FeatMemTopology  FeatureID = 22
	FeatClockID      FeatureID = 23
	FeatBPFProgInfo  FeatureID = 25
	FeatBPFBTF       FeatureID = 26
	FeatClockData    FeatureID = 29
	FeatPMUCaps      FeatureID = 31
	// FeatLast is HEADER_LAST_FEATURE of perf 6.1: the bound of the
	// feature bitmap perf reads, and the id of the pipe-mode end marker.
	FeatLast FeatureID = 32
)

// FeatureID is the id of a feature section (enum HEADER_* of
// tools/perf/util/header.h): its bit in the header's feature bitmap.
type FeatureID int

var featureNames = map[FeatureID]string{
	FeatTracingData: "TRACING_DATA", FeatBuildID: "BUILD_ID", FeatHostname: "HOSTNAME",
	FeatOSRelease: "OSRELEASE", FeatVersion: "VERSION", FeatArch: "ARCH", FeatNrCPUs: "NRCPUS",
	FeatCPUDesc: "CPUDESC", FeatCPUID: "CPUID", FeatTotalMem: "TOTAL_MEM", FeatCmdline: "CMDLINE",
	FeatEventDesc: "EVENT_DESC", FeatCPUTopology: "CPU_TOPOLOGY", FeatNUMATopology: "NUMA_TOPOLOGY",
	FeatPMUMappings: "PMU_MAPPINGS", FeatCache: "CACHE", FeatSampleTime: "SAMPLE_TIME",
	FeatMemTopology: "MEM_TOPOLOGY", FeatClockID: "CLOCKID", FeatBPFProgInfo: "BPF_PROG_INFO",
	FeatBPFBTF: "BPF_BTF", FeatClockData: "CLOCK_DATA", FeatPMUCaps: "PMU_CAPS",
}

// String returns the name perf gives the feature after HEADER_, as perf
// report --header-only names it, or "FeatureID(N)" for one synth does
// not write.
func (f FeatureID) String() string {
	if n, ok := featureNames[f]; ok {
		return n
	}
	return fmt.Sprintf("FeatureID(%d)", int(f))
}
