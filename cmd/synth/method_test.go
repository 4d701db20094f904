package main

import (
	"os"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// auto falls back from bpf when CAP_BPF is missing, and says why in one
// line before the summary: to procquery, or procmaps on a kernel without
// PROCMAP_QUERY.
func TestAutoFallback(t *testing.T) {
	testenv.Root(t)
	procs := procMethods(t)
	want := procs[len(procs)-1] // procquery where the kernel has it
	// but procmaps first where the kernel isolates its page tables
	if b, err := os.ReadFile("/sys/devices/system/cpu/vulnerabilities/meltdown"); err == nil && strings.Contains(string(b), "PTI") {
		want = synth.MethodProcmaps.String()
	}
	r := runCmd(t, setpriv(t, "--inh-caps=-bpf,-sys_admin", "--bounding-set=-bpf,-sys_admin"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	first, rest, _ := strings.Cut(r.stderr, "\n")
	if !strings.HasPrefix(first, "synth: using a fallback method because bpf: ") || !strings.Contains(first, "CAP_BPF") {
		t.Errorf("first line %q does not say why bpf was not used", first)
	}
	if sum := parseSummary(t, rest); sum.method != want {
		t.Errorf("auto chose %q, want %s", sum.method, want)
	}
}
