package perfdata

import "fmt"

// Record types (enum perf_event_type, include/uapi/linux/perf_event.h, and
// the user-space types of tools/lib/perf/include/perf/event.h). They are
// untyped, so that they compare with a uint32 as well as a RecordType.
const (
	RecordMmap              = 1
	RecordLost              = 2
	RecordComm              = 3
	RecordExit              = 4
	RecordThrottle          = 5
	RecordUnthrottle        = 6
	RecordFork              = 7
	RecordRead              = 8
	RecordSample            = 9
	RecordMmap2             = 10
	RecordAux               = 11
	RecordItraceStart       = 12
	RecordLostSamples       = 13
	RecordSwitch            = 14
	RecordSwitchCPUWide     = 15
	RecordNamespaces        = 16
	RecordKsymbol           = 17
	RecordBPFEvent          = 18
	RecordCgroup            = 19
	RecordTextPoke          = 20
	RecordAuxOutputHwID     = 21
	RecordHeaderAttr        = 64
	RecordHeaderEventType   = 65
	RecordHeaderTracingData = 66
	RecordHeaderBuildID     = 67
	RecordFinishedRound     = 68
	RecordIDIndex           = 69
	RecordAuxtraceInfo      = 70
	RecordAuxtrace          = 71
	RecordAuxtraceError     = 72
	RecordThreadMap         = 73
	RecordCPUMap            = 74
	RecordStatConfig        = 75
	RecordStat              = 76
	RecordStatRound         = 77
	RecordEventUpdate       = 78
	RecordTimeConv          = 79
	RecordHeaderFeature     = 80
	RecordCompressed        = 81
	RecordFinishedInit      = 82
)

// RecordType is the type of a record, perf_event_header.type.
type RecordType uint32

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
	AttrBuildID       = 1 << 34
)

// Feature section ids (tools/perf/util/header.h, perf 6.1).
const (
	FeatTracingData  = 1
	FeatBuildID      = 2
	FeatHostname     = 3
	FeatOSRelease    = 4
	FeatVersion      = 5
	FeatArch         = 6
	FeatNrCPUs       = 7
	FeatCPUDesc      = 8
	FeatCPUID        = 9
	FeatTotalMem     = 10
	FeatCmdline      = 11
	FeatEventDesc    = 12
	FeatCPUTopology  = 13
	FeatNUMATopology = 14
	FeatPMUMappings  = 16
	FeatCache        = 20
	FeatSampleTime   = 21
	FeatMemTopology  = 22
	FeatClockID      = 23
	FeatBPFProgInfo  = 25
	FeatBPFBTF       = 26
	FeatClockData    = 29
	FeatPMUCaps      = 31
	// FeatLast is HEADER_LAST_FEATURE of perf 6.1: the bound of the
	// feature bitmap perf reads, and the id of the pipe-mode end marker.
	FeatLast = 32
)
