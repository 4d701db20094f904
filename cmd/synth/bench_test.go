package main

import (
	"encoding/json"
	"os/exec"
	"slices"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// synth bench --json runs every method and names them as documented.
func TestBenchJSON(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	r := runCmd(t, exec.Command(synthBin, "bench", "--reps", "1", "--threads", "2", "--json"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Host struct {
			VMAs     int    `json:"vmas"`
			CPUModel string `json:"cpu_model"`
		} `json:"host"`
		Methods []struct {
			Name     string  `json:"name"`
			MedianNs int64   `json:"median_ns"`
			Mappings int     `json:"mappings"`
			Ratio    float64 `json:"ratio_to_bpf"`
			RSS      int64   `json:"peak_rss_bytes"`
			CPU      int64   `json:"cpu_ns"`
		} `json:"methods"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	var names []string
	for _, m := range out.Methods {
		names = append(names, m.Name)
		// perf-buildid is a difference of two perf record runs: on a
		// host this small it is within their start-up's noise, and 0.
		timed := m.MedianNs > 0 || m.Name == "perf-buildid" && m.MedianNs == 0
		if !timed || m.RSS <= 0 || m.Mappings <= 0 || m.CPU <= 0 {
			t.Errorf("%s: %+v", m.Name, m)
		}
	}
	want := []string{"bpf", "bpf-cold", "bpf-iter", "bpf-nobuildid", "bpf-nolive", "procmaps-1", "procmaps-2", "procquery-1", "procquery-2", "floor-maple", "floor-iter", "perf-st", "perf-mt", "perf-buildid",
		"whole-synth", "whole-synth-nobuildid", "whole-synth-nobtfcache", "whole-perf", "whole-perf-buildid"}
	if !slices.Equal(names, want) {
		t.Errorf("methods %v, want %v", names, want)
	}
	if out.Methods[0].Ratio != 1 || out.Host.VMAs == 0 || out.Host.CPUModel == "" {
		t.Errorf("bpf ratio %v, host VMAs %d, CPU %q", out.Methods[0].Ratio, out.Host.VMAs, out.Host.CPUModel)
	}
}
