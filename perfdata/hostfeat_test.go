package perfdata

// testFeatures are a host description of every section the encoders of
// hostfeat.go write, with fixed values: a two-CPU, one-node host.
func testFeatures(cmdline ...string) []Feature {
	fs := []Feature{
		StringFeature(FeatHostname, testHost),
		StringFeature(FeatOSRelease, "6.1.0-test"),
		StringFeature(FeatVersion, "synth test"),
		StringFeature(FeatArch, "x86_64"),
		NrCPUsFeature(2, 2),
		CmdlineFeature(cmdline),
		StringFeature(FeatCPUDesc, "Test CPU @ 2.00GHz"),
		StringFeature(FeatCPUID, "GenuineIntel,6,85,7"),
		TotalMemFeature(24 << 20),
		CPUTopology{
			PackageCPUs: []string{"0-1"},
			CoreCPUs:    []string{"0", "1"},
			CPUs:        []CPUTopologyIDs{{Core: 0, Socket: 0}, {Core: 1, Socket: 0}},
			DieCPUs:     []string{"0-1"},
			DieIDs:      []int32{0, 0},
		}.Feature(),
		NUMATopologyFeature([]NUMANode{{ID: 0, TotalKB: 24 << 20, FreeKB: 20 << 20, CPUs: "0-1"}}),
		PMUMappingsFeature([]PMU{{Type: 4, Name: "cpu"}, {Type: 1, Name: "software"}}),
		CacheFeature([]CacheLevel{
			{Level: 1, LineSize: 64, Sets: 64, Ways: 8, Type: "Data", Size: "32K", SharedCPUs: "0"},
			{Level: 2, LineSize: 64, Sets: 1024, Ways: 16, Type: "Unified", Size: "1024K", SharedCPUs: "0"},
		}),
		MemTopologyFeature(128<<20, []MemNode{{ID: 0, Blocks: []uint64{0, 1, 2, 3, 70}}}),
		PMUCapsFeature([]PMUCaps{{PMU: "ibs_op", Caps: []PMUCap{{Name: "zen4_ibs_extensions", Value: "1"}}}}),
	}
	fs = append(fs, ClockFeatures(1, 1, 1_764_000_000_000_000_000, 5_000_000_000)...)
	return append(fs, BPFFeatures(nil, nil)...)
}

// testHost is the hostname of testFeatures.
const testHost = "synth-test-host"

// modeOf is ModePipe or ModeFile.
func modeOf(pipe bool) Mode {
	if pipe {
		return ModePipe
	}
	return ModeFile
}
