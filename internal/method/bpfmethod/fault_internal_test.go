package bpfmethod

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
)

// faulty is a test process with every kind of mapping, and enough of
// them that the smallest rings take its walk in chunks.
var faulty = testproc.Spec{
	LongPath: true, SpacePath: true, Deleted: true, Memfd: true, AnonExec: true,
	DataFile: true, ManyVMAs: 5000, Threads: []string{"synth-a", "synth b worker"},
}

// Each fault of a walk ends in the fallback, counted, and in records
// equal to /proc: a resume state lost, a writer between chunks, the mm
// replaced or the pid reused between chunks, the record that ends the
// walk lost with its batch, a walk that did not hold, in one chunk or
// in many.
func TestWalkFaults(t *testing.T) {
	needMaple(t)
	p := testproc.StartT(t, faulty)
	for _, tc := range []struct {
		name    string
		f       fault
		pages   int
		resumed bool // the walk took chunks before the fault
	}{
		{"resume-lost", faultLoseResume, config.MinRingPages, true},
		{"sequence-moved", faultResumeSeq, config.MinRingPages, true},
		{"mm-replaced", faultResumeMM, config.MinRingPages, true},
		{"pid-reused", faultResumePid, config.MinRingPages, true},
		{"walk-record-lost", faultDropWalk, config.MinRingPages, true},
		{"invalid", faultWalkInvalid, 0, false},
		{"invalid-in-chunks", faultWalkInvalid, config.MinRingPages, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(config.Resolved{Options: config.Options{Data: true, RingPages: tc.pages}, Pids: []int{p.Pid}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			b.injectFault(p.Pid, tc.f)
			d := dumpProc(t, b)
			if d.stats.WalksInvalid != 1 || tc.resumed && d.stats.Resumed == 0 {
				t.Errorf("%d chunks resumed, %d walks failed; want 1 failed (and some resumed: %v)",
					d.stats.Resumed, d.stats.WalksInvalid, tc.resumed)
			}
			d.check(t, p)
		})
	}
}

// On a kernel with the maple walk, the task_vma iterator is loaded only
// for a process whose walk did not hold. Should that load fail, the dump
// fails naming it: a process is never left out, nor read in part.
func TestFallbackLoadsLate(t *testing.T) {
	needMaple(t)
	p := testproc.StartT(t, faulty)
	opts := config.Resolved{Options: config.Options{Data: true, NoKernel: true}, Pids: []int{p.Pid}}
	defer RefuseProgram("dump_vma")()
	t.Run("held", func(t *testing.T) {
		b, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		d := dumpProc(t, b)
		if d.stats.Walk != config.WalkMaple || d.stats.WalksInvalid != 0 {
			t.Errorf("walk %q, %d walks failed; want maple, 0", d.stats.Walk, d.stats.WalksInvalid)
		}
		d.check(t, p)
	})
	t.Run("fell-back", func(t *testing.T) {
		b, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		b.injectFault(p.Pid, faultWalkInvalid)
		_, err = b.Dump(context.Background(), func([]byte) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "dump_vma") {
			t.Fatalf("dump whose walk fell back without dump_vma: %v, want its load error", err)
		}
	})
}

// Records of another generation left in the rings are dropped and
// counted, and those of the current one pass.
func TestDumpDropsStaleGeneration(t *testing.T) {
	testenv.Root(t)
	cmd := exec.Command("sleep", "60") // one thread: a FORK and a COMM per task pass
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	b, err := New(config.Resolved{Options: config.Options{NoKernel: true}, Pids: []int{pid}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const injected = 3
	for range injected {
		if err := b.emitStale(pid, 1000); err != nil {
			t.Fatal(err)
		}
	}
	d := dumpProc(t, b)
	if d.stats.Stale != 2*injected {
		t.Errorf("dump dropped %d stale records, want %d", d.stats.Stale, 2*injected)
	}
	if n := slices.Index(d.types, perfdata.RecordComm); n < 0 || slices.Index(d.types[n+1:], perfdata.RecordComm) >= 0 {
		t.Errorf("records %v of the one-thread process: want one COMM", d.types)
	}
}

// needMaple skips t where the BPF method does not choose the maple walk,
// and fails it where it should (testenv.Kernel).
func needMaple(t *testing.T) {
	t.Helper()
	testenv.Root(t)
	b, err := New(config.Resolved{Options: config.Options{NoKernel: true, NoBuildID: true}})
	if err != nil {
		t.Fatal(err)
	}
	walk, why := b.Walk()
	b.Close()
	if unsafe := (*UnsafeIterError)(nil); errors.As(why, &unsafe) {
		t.Skipf("no maple walk on this kernel, rightly: %v", why)
	}
	testenv.Kernel(t, walk == config.WalkMaple, "6.14", fmt.Sprint(why))
}

// procDump is one dump's records of a test process, decoded.
type procDump struct {
	stats config.Stats
	types []perfdata.RecordType
	maps  []procfs.Mapping
	ids   map[uint64][]byte // build ID of the MMAP2 at each start
	comms map[int]string
}

// dumpProc runs one dump of b and decodes it.
func dumpProc(t *testing.T, b *BPF) *procDump {
	t.Helper()
	d := &procDump{ids: map[uint64][]byte{}, comms: map[int]string{}}
	var err error
	d.stats, err = b.Dump(context.Background(), func(rec []byte) error { return d.add(rec) })
	if err != nil {
		t.Fatal(err)
	}
	if d.stats.Lost != 0 {
		t.Errorf("%d records lost", d.stats.Lost)
	}
	return d
}

func (d *procDump) add(rec []byte) error {
	typ := perfdata.RecordView(rec).Type()
	d.types = append(d.types, typ)
	switch typ {
	case perfdata.RecordMmap2:
		m, _, err := perfdata.ParseMmap2(rec, config.DefaultSampleType)
		if err != nil {
			return err
		}
		path := m.Filename
		if path == "//anon" {
			path = ""
		}
		d.maps = append(d.maps, procfs.Mapping{Start: m.Addr, End: m.Addr + m.Len, Pgoff: m.Pgoff, Prot: m.Prot,
			Shared: m.Flags&1 != 0, Path: path})
		d.ids[m.Addr] = m.BuildID
	case perfdata.RecordComm:
		c, _, err := perfdata.ParseComm(rec, config.DefaultSampleType)
		if err != nil {
			return err
		}
		d.comms[int(c.Tid)] = c.Comm
	}
	return nil
}

// check compares the dump with /proc: the test process is idle, so
// they agree. A mapping is compared by its range, offset, protection,
// sharing and path, and its build ID with the one of the file it maps.
func (d *procDump) check(t *testing.T, p *testproc.Proc) {
	t.Helper()
	maps, err := p.Maps()
	if err != nil {
		t.Fatal(err)
	}
	key := func(m procfs.Mapping) string {
		return fmt.Sprintf("%x-%x %x prot=%d shared=%v %q", m.Start, m.End, m.Pgoff, m.Prot, m.Shared, m.Path)
	}
	var want, got []string
	for _, m := range maps {
		want = append(want, key(m))
		if id := d.ids[m.Start]; id != nil && !bytes.Equal(id, fileBuildID(p.Pid, m)) {
			t.Errorf("%s: build ID %x, its file's is %x", key(m), id, fileBuildID(p.Pid, m))
		}
	}
	for _, m := range d.maps {
		got = append(got, key(m))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("pid %d: %d mappings dumped, /proc/%d/maps has %d; first difference: %s", p.Pid, len(got), p.Pid, len(want), firstDiff(want, got))
	}
	comms, err := p.Comms()
	if err != nil {
		t.Fatal(err)
	}
	for tid, comm := range comms {
		if d.comms[tid] != comm {
			t.Errorf("tid %d: COMM %q, /proc says %q", tid, d.comms[tid], comm)
		}
	}
}

// fileBuildID reads the build ID of the file m maps, through
// /proc/PID/map_files, with debug/elf rather than the package's own
// reader (internal/elfnote); nil for none.
func fileBuildID(pid int, m procfs.Mapping) []byte {
	f, err := elf.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End))
	if err != nil {
		return nil
	}
	defer f.Close()
	sec := f.Section(".note.gnu.build-id")
	if sec == nil {
		return nil
	}
	b, err := sec.Data()
	if err != nil || len(b) < 16 {
		return nil
	}
	// Elf_Nhdr (namesz, descsz, type), then "GNU\0", then the ID.
	descsz := f.ByteOrder.Uint32(b[4:])
	if string(b[12:16]) != "GNU\x00" || uint64(len(b)) < 16+uint64(descsz) {
		return nil
	}
	return b[16 : 16+descsz]
}

// firstDiff names the first line of two sorted lists that only one has.
func firstDiff(want, got []string) string {
	for i := 0; i < len(want) || i < len(got); i++ {
		switch {
		case i >= len(got):
			return "missing " + want[i]
		case i >= len(want) || want[i] != got[i] && !slices.Contains(want, got[i]):
			return "extra " + got[i]
		case want[i] != got[i]:
			return "missing " + want[i]
		}
	}
	return "none"
}
