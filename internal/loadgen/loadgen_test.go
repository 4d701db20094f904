package loadgen_test

import (
	"os"
	"testing"

	"github.com/synth-dev/synth/internal/loadgen"
	"github.com/synth-dev/synth/internal/procfs"
)

func TestMain(m *testing.M) {
	loadgen.Main()
	os.Exit(m.Run())
}

// Load processes hold the VMAs they report: file-backed executable ones
// from real libraries, data and anonymous ones, unmerged.
func TestLoad(t *testing.T) {
	before := hostVMAs(t)
	l, err := loadgen.Start(2, 3000)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	if l.VMAs < 6000 {
		t.Errorf("load reports %d VMAs, want >= 6000", l.VMAs)
	}
	if got := hostVMAs(t) - before; got < 6000 {
		t.Errorf("host gained %d VMAs, want >= 6000", got)
	}
	if err := l.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

func hostVMAs(t *testing.T) int {
	pids, err := procfs.Pids()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, pid := range pids {
		if maps, err := procfs.ReadMaps(pid); err == nil {
			n += len(maps)
		}
	}
	return n
}
