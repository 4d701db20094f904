package perfhost

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// On arm64 the cpuid is perf's: the first online CPU's MIDR_EL1 that
// sysfs has, without variant and revision, as 0x%016x (a Neoverse N1
// r3p1 here, 0x413fd0c1, reads 0x00000000410fd0c0).
func TestArmCPUID(t *testing.T) {
	dir := t.TempDir()
	for cpu, midr := range map[string]string{"cpu1": "0x00000000413fd0c1\n", "cpu2": "0x00000000414fd0b0\n"} {
		d := filepath.Join(dir, cpu, "regs/identification")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "midr_el1"), []byte(midr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// cpu0 is online but has no MIDR (as under some hypervisors): the
	// next online CPU's is taken.
	f, ok := armCPUID(dir, []int{0, 1, 2})
	if want := perfdata.StringFeature(perfdata.FeatCPUID, "0x00000000410fd0c0"); !ok || string(f.Data) != string(want.Data) {
		t.Errorf("cpuid %q, %v; want %q", f.Data, ok, want.Data)
	}
	if _, ok := armCPUID(dir, []int{0, 3}); ok {
		t.Error("a cpuid without any CPU's MIDR")
	}
}
