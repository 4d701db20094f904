package synth_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/perfring"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// The kernel sets PERF_RECORD_MISC_MMAP_BUILD_ID in the mmap event it
// shares among every event it reports a mapping to, and never takes it
// back (perf_event_mmap_output()): an event without build IDs that the
// kernel serves after one with them gets the bit over a record of the
// maj/min/ino form. Newer side-band events are served first, so an
// event with build IDs (another program's perf record --buildid-mmap,
// here openBuildIDEvents) opened after a session leaks the bit into the
// session's records. The session takes it off: its MMAP2 records are of
// the maj/min/ino form, with the file's device and inode, or, with build
// IDs, of the build-ID form with the IDs synth read (no size over 20).
func TestSessionClearsLeakedBuildID(t *testing.T) {
	for _, noBuildID := range []bool{true, false} {
		t.Run(fmt.Sprintf("nobuildid=%v", noBuildID), func(t *testing.T) {
			s := openSession(t, synth.SessionOptions{Options: synth.Options{NoBuildID: noBuildID}})
			openBuildIDEvents(t) // newer
			runTrue(t, 20)
			var maps, withBit, bad int
			readFlushed(t, s, func(r *synth.Record) {
				if r.Kind != synth.KindLive || r.Type() != perfdata.RecordMmap2 {
					return
				}
				maps++
				if m := perfdata.Mmap2View(r.Raw); m.HasBuildID() {
					withBit++
					if m.BuildIDSize() > perfdata.BuildIDMax || m.BuildIDSize() == 0 {
						bad++
					}
				}
			})
			if maps == 0 {
				t.Fatal("no live MMAP2 of /bin/true's runs")
			}
			if noBuildID && withBit > 0 || bad > 0 {
				t.Errorf("%d of %d MMAP2 records carry the build-ID bit, %d of them of a size the kernel's device number set",
					withBit, maps, bad)
			}
		})
	}
}

// openBuildIDEvents opens, on every CPU, a side-band event that asks the
// kernel for build IDs (attr.build_id), as perf record --buildid-mmap
// does: the kernel's mmap event then carries the build-ID bit to every
// older event.
func openBuildIDEvents(t *testing.T) {
	t.Helper()
	cpus, err := perfring.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	a := perfdata.Attr{Type: perfdata.TypeSoftware, Size: perfdata.AttrSize, Config: perfdata.CountSWDummy,
		SamplePeriod: 1, Flags: perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrBuildID}
	for _, cpu := range cpus {
		ev, err := perfring.Open(&a, -1, cpu)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ev.Close() })
		if err := ev.MapRing(8); err != nil {
			t.Fatal(err)
		}
	}
}

// perf record without build IDs, with an event with them opened after
// it (a perf record --buildid-mmap; a synth session, before synth asked
// the kernel for none), writes MMAP2 records with the build-ID bit over
// the maj/min/ino form: perf 6.1's report aborts on them
// (util/build-id.c:1010) when the device's major number is over 20. This
// is how TestPidNamespace's perf report once aborted in CI. Inject takes
// the bit off perf's records, keeping their device and inode, and perf
// report reads the output.
func TestInjectLeakedBuildID(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	cmd := exec.Command(perf, "record", "-q", "-a", "--synth=no", "-k", "CLOCK_MONOTONIC", "-o", "-", "--", "sleep", "1")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stream, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stream, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // perf's events open
	openBuildIDEvents(t)
	runTrue(t, 20)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
	}
	keys := buildIDBits(stream.Bytes())
	leaked := len(keys)
	if leaked == 0 {
		t.Skip("the kernel leaked no build-ID bit into perf's records: perf_event_mmap_output() is fixed here")
	}
	path, st := injectAndReport(t, perf, stream.Bytes())
	if st.BadBuildIDs != leaked {
		t.Errorf("inject cleared %d build-ID bits of perf's; the stream has %d", st.BadBuildIDs, leaked)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := perfdata.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	withBit, withInode := 0, map[[2]uint64]bool{}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Type != perfdata.RecordMmap2 {
			continue
		}
		m := perfdata.Mmap2View(rec.Data)
		if m.HasBuildID() {
			withBit++
		} else if _, _, ino, _ := m.Inode(); ino != 0 {
			withInode[[2]uint64{uint64(m.Pid()), m.Addr()}] = true
		}
	}
	kept := 0
	for _, k := range keys {
		if withInode[k] {
			kept++
		}
	}
	if withBit != 0 || kept != leaked {
		t.Errorf("the output has %d MMAP2 records with the build-ID bit; %d of the %d perf had with it kept their inode (%s)",
			withBit, kept, leaked, testenv.Keep(path))
	}
	t.Logf("%d of perf's MMAP2 records had the build-ID bit over maj/min/ino", leaked)
}

// runTrue runs /bin/true n times: each exec maps files with build IDs.
func runTrue(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Fatal(err)
		}
	}
}

// buildIDBits returns the pid and address of the MMAP2 records of a
// pipe-mode stream that carry the build-ID bit.
func buildIDBits(stream []byte) [][2]uint64 {
	le := binary.LittleEndian
	var keys [][2]uint64
	for off := 16; off+8 <= len(stream); {
		typ, misc, size := perfdata.RecordType(le.Uint32(stream[off:])), le.Uint16(stream[off+4:]), int(le.Uint16(stream[off+6:]))
		if size < 8 || off+size > len(stream) || typ == perfdata.RecordHeaderTracingData || typ == perfdata.RecordAuxtrace {
			break
		}
		if typ == perfdata.RecordMmap2 && misc&perfdata.MiscMmapBuildID != 0 && size > 24 {
			keys = append(keys, [2]uint64{uint64(le.Uint32(stream[off+8:])), le.Uint64(stream[off+16:])})
		}
		off += size
	}
	return keys
}

// A session opened while a user's perf record runs must leave perf's
// file as perf would write it alone: the session asks the kernel for no
// build IDs, so the kernel's shared mmap event never gets the build-ID
// bit, and perf's MMAP2 records keep the maj/min/ino form. With a
// side-band that asked for them, the kernel set the bit on perf's
// records too (perf_event_mmap_output()), and perf 6.1 aborted on them
// in its own end-of-recording build-ID pass (util/build-id.c:1010).
func TestSessionLeavesPerfRecordAlone(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	out := filepath.Join(t.TempDir(), "perf.data")
	cmd := exec.Command(perf, "record", "-q", "-e", "dummy", "-a", "--synth=no", "-o", out, "--", "sleep", "1")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)          // perf's events open
	s := openSession(t, synth.SessionOptions{}) // with build IDs, the default
	runTrue(t, 20)
	werr := cmd.Wait()
	s.Close()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%s: %v; %v\n%s", cmd, werr, err, stderr.String())
	}
	r, err := perfdata.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v; read: %v\n%s", cmd, werr, err, stderr.String())
	}
	maps, withBit := 0, 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Type == perfdata.RecordMmap2 {
			maps++
			if perfdata.Mmap2View(rec.Data).HasBuildID() {
				withBit++
			}
		}
	}
	if werr != nil || withBit > 0 || maps == 0 {
		t.Errorf("%s: %v; %d of its %d MMAP2 records have the build-ID bit (%s)\n%s",
			cmd, werr, withBit, maps, testenv.Keep(out), stderr.String())
	}
}

// The side-band asks the kernel for no build IDs, yet a session's live
// MMAP2 of an ELF file with one carries it, read by synth from the
// file, and the Table resolves an address in it to that build ID.
func TestSessionLiveBuildID(t *testing.T) {
	s := openSession(t, synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}}})
	for a := range s.Attrs() {
		if s.Attrs()[a].Attr.Flags&perfdata.AttrBuildID != 0 {
			t.Errorf("attr %s asks the kernel for build IDs", s.Attrs()[a].Name)
		}
	}
	path := filepath.Join(t.TempDir(), "libelf-live.so")
	if err := os.WriteFile(path, elftest.Crafted()["good"], 0o644); err != nil {
		t.Fatal(err)
	}
	want := elftest.CraftedID("good")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	addr := uint64(uintptr(unsafe.Pointer(&mem[0])))
	tb := synth.NewTable()
	var got []byte
	found := false
	readFlushed(t, s, func(r *synth.Record) {
		tb.Apply(r)
		if r.Kind != synth.KindLive || r.Type() != perfdata.RecordMmap2 {
			return
		}
		if m := perfdata.Mmap2View(r.Raw); string(m.Filename()) == path {
			found, got = true, slices.Clone(m.BuildID())
		}
	})
	if !found {
		t.Fatalf("no live MMAP2 of %s", path)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("live MMAP2 of %s: build ID %x, want %x", path, got, want)
	}
	if loc, ok := tb.Resolve(uint32(os.Getpid()), addr+16); !ok || !bytes.Equal(loc.Mapping.BuildID, want) {
		t.Errorf("table resolves %#x to %+v (%v), want build ID %x", addr+16, loc.Mapping, ok, want)
	}
}
