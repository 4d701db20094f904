package loadgen_test

import (
	"os"
	"strings"
	"testing"

	"github.com/synth-dev/synth/cmd/synth/internal/loadgen"
	"github.com/synth-dev/synth/internal/procfs"
)

func TestMain(m *testing.M) {
	loadgen.Main()
	os.Exit(m.Run())
}

// Load processes hold the VMAs they report: file-backed executable ones
// from real libraries, data and anonymous ones, unmerged.
func TestLoad(t *testing.T) {
	l, err := loadgen.Start(2, 3000)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	if l.VMAs < 6000 {
		t.Errorf("load reports %d VMAs, want >= 6000", l.VMAs)
	}
	var vmas, libText int
	for _, pid := range l.Pids() {
		maps, err := procfs.ReadMaps(pid)
		if err != nil {
			t.Fatal(err)
		}
		vmas += len(maps)
		for _, m := range maps {
			if m.Prot&4 != 0 && strings.HasPrefix(m.Path, "/usr/lib/") {
				libText++
			}
		}
	}
	if vmas < 6000 || libText < 1000 {
		t.Errorf("load processes hold %d VMAs, %d of library text; want >= 6000 and >= 1000", vmas, libText)
	}
	if err := l.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
