package bpfmethod

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
)

// A short MMAP2 record of the maple walk expands into the record a full
// one would have been: the file's identity and name from the record
// before it, the rest its own.
func TestExpandNext(t *testing.T) {
	prev := perfdata.Mmap2{Misc: perfdata.MiscUser, Pid: 7, Tid: 7, Addr: 0x1000, Len: 0x1000,
		Pgoff: 0, BuildID: []byte{1, 2, 3, 4}, Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_PRIVATE,
		Filename: "/usr/lib/libx.so"}
	want := prev
	want.Addr, want.Len, want.Pgoff, want.Prot = 0x5000, 0x3000, 0x4000, unix.PROT_READ|unix.PROT_EXEC
	want.Misc = perfdata.MiscUser | perfdata.MiscMmapData
	le := binary.NativeEndian
	next := make([]byte, nextSize)
	le.PutUint32(next, uint32(recordMmap2Next))
	le.PutUint16(next[4:], want.Misc|perfdata.MiscMmapBuildID)
	le.PutUint16(next[6:], uint16(nextSize))
	le.PutUint32(next[nextPid:], 7)
	le.PutUint32(next[nextPid+4:], 7)
	le.PutUint64(next[nextAddr:], want.Addr)
	le.PutUint64(next[nextAddr+8:], want.Len)
	le.PutUint64(next[nextAddr+16:], want.Pgoff)
	le.PutUint32(next[nextProt:], want.Prot)
	le.PutUint32(next[nextProt+4:], want.Flags)

	got, err := expandNext(nil, prev.Append(nil, 0, nil), next)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := perfdata.ParseMmap2(got, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want.Misc |= perfdata.MiscMmapBuildID; !reflect.DeepEqual(m, want) {
		t.Errorf("expanded\n%+v\nwant\n%+v", m, want)
	}

	// A short record must follow a whole one of its own process.
	other := prev
	other.Pid = 8
	if _, err := expandNext(nil, other.Append(nil, 0, nil), next); err == nil {
		t.Error("a short record expanded from another process's record")
	}
	if _, err := expandNext(nil, nil, next); err == nil {
		t.Error("a short record expanded from nothing")
	}
	if _, err := expandNext(nil, prev.Append(nil, 0, nil), next[:20]); err == nil {
		t.Error("a truncated short record expanded")
	}
}

// walkLimits keeps what one paced read can put into a ring within half of
// it, and a chunk's pacing within the iterator's seq_file beside the
// budget, for every ring size the options allow.
func TestWalkLimits(t *testing.T) {
	for pages := config.MinRingPages; pages <= 1<<16; pages *= 2 {
		ring := pages * os.Getpagesize()
		chunk, budget := walkLimits(ring)
		if budget <= 0 || int(chunk) < maxRecordBytes {
			t.Fatalf("%d pages: chunk %d, budget %d: no room for one record", pages, chunk, budget)
		}
		if perRead := budget*paceUnit + 2*synthBatchBytes + int(chunk); perRead > ring/2 {
			t.Errorf("%d pages: one read may write %d bytes, more than half the ring", pages, perRead)
		}
		if seq := budget + (int(chunk)+2*synthBatchBytes)/paceUnit + int(chunk)/synthBatchBytes + 2; seq > 32<<10 {
			t.Errorf("%d pages: %d bytes of pacing in one read overflow the seq_file", pages, seq)
		}
	}
}

// A file new to the build-ID cache is noted with the first process the
// walk finds mapping it. When that process is gone by the time the file
// is read (a short-lived child), another process that maps the file is
// read instead, and its records still get the build ID.
func TestBuildIDFromAnotherMapping(t *testing.T) {
	testenv.Root(t)
	path := filepath.Join(t.TempDir(), "good.so")
	if err := os.WriteFile(path, elftest.Crafted()["good"], 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.StartT(t, testproc.Spec{Maps: []testproc.MapSpec{{Path: path}}})
	b, err := New(config.Resolved{Pids: []int{p.Pid}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ids := func() (n int) {
		t.Helper()
		_, err := b.Dump(context.Background(), func(rec []byte) error {
			if perfdata.RecordView(rec).Type() == perfdata.RecordMmap2 && bytes.Contains(rec, []byte(path)) &&
				binary.NativeEndian.Uint16(rec[4:])&perfdata.MiscMmapBuildID != 0 &&
				bytes.Equal(perfdata.Mmap2View(rec).BuildID(), elftest.GoodID) {
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := ids(); n != 1 {
		t.Fatalf("first dump: %d records of %s with its build ID, want 1", n, path)
	}
	// Forget the file, and note it as mapped by a process that is gone:
	// the walk's own note (BPF_NOEXIST) then does not replace it.
	var (
		key   synthbpf.SynthSynthFileKey
		id    synthbpf.SynthSynthBuildId
		found bool
	)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for it := b.lo.objs.BuildIds.Iterate(); it.Next(&key, &id); {
		if key.Ino == fi.Sys().(*syscall.Stat_t).Ino {
			found = true
			break
		}
	}
	if !found {
		t.Fatal("the file is not in the build-ID cache")
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := b.lo.objs.BuildIds.Delete(&key); err != nil {
		t.Fatal(err)
	}
	note := synthbpf.SynthSynthPending{Pid: uint32(gone.Process.Pid), Start: 0x10000, End: 0x11000}
	if err := b.lo.objs.Pending.Put(&key, &note); err != nil {
		t.Fatal(err)
	}
	if n := ids(); n != 1 {
		t.Errorf("with the noted process gone: %d records of %s with its build ID, want 1", n, path)
	}
}
