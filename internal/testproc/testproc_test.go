package testproc_test

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/synth-dev/synth/internal/testproc"
)

func TestMain(m *testing.M) {
	testproc.Main()
	os.Exit(m.Run())
}

func TestEverything(t *testing.T) {
	p := testproc.StartT(t, testproc.Spec{
		LongPath: true, SpacePath: true, Deleted: true, Memfd: true, AnonExec: true,
		DataFile: true, ManyVMAs: 5000, Threads: []string{"synth-a", "synth b worker"},
	})
	maps, err := p.Maps()
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) < 5000 {
		t.Errorf("%d VMAs, want >= 5000", len(maps))
	}
	var long []uint64
	var space, deleted, memfd, anonExec, roData, shared bool
	for _, m := range maps {
		switch {
		case len(m.Path) > 300:
			long = append(long, m.Pgoff)
		case strings.HasSuffix(m.Path, "/dir with spaces/lib with spaces.so"):
			space = m.Prot == 5
		case strings.HasSuffix(m.Path, "/deleted-lib.so (deleted)"):
			deleted = true
		case m.Path == "/memfd:synth-test (deleted)":
			memfd = m.Shared && m.Prot == 5
		case m.Path == "" && m.Prot == 7:
			anonExec = true
		case strings.HasSuffix(m.Path, "/data-ro.bin"):
			roData = m.Prot == 1 && !m.Shared
		case strings.HasSuffix(m.Path, "/data-shared.bin"):
			shared = m.Prot == 3 && m.Shared
		}
	}
	slices.Sort(long)
	if page := uint64(os.Getpagesize()); !slices.Equal(long, []uint64{0, page}) {
		t.Errorf("long path mapped at offsets %v, want [0 %d]", long, page)
	}
	for what, ok := range map[string]bool{"path with spaces": space, "deleted file": deleted,
		"memfd": memfd, "anonymous rwx": anonExec, "read-only data": roData, "shared data": shared} {
		if !ok {
			t.Errorf("no %s mapping", what)
		}
	}
	comms, err := p.Comms()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range comms {
		names = append(names, c)
	}
	for _, want := range []string{"synth-a", "synth b worker"} {
		if !slices.Contains(names, want) {
			t.Errorf("no thread %q in %q", want, names)
		}
	}
	if err := p.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := syscall.Kill(p.Pid, 0); err != syscall.ESRCH {
		t.Errorf("process %d still there after Stop: %v", p.Pid, err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
}
