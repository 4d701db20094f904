package synth_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// The kernel sets PERF_RECORD_MISC_MMAP_BUILD_ID in the mmap event it
// shares among every event it reports a mapping to, and never takes it
// back (perf_event_mmap_output()): an event without build IDs that the
// kernel serves after one with them gets the bit over a record of the
// maj/min/ino form. Newer side-band events are served first, so a
// session with build IDs opened after one without leaks the bit into
// the older one's records. The session without build IDs takes it off:
// its MMAP2 records are all of the maj/min/ino form, with the file's
// device and inode.
func TestSessionClearsLeakedBuildID(t *testing.T) {
	plain := openSession(t, synth.SessionOptions{Options: synth.Options{NoBuildID: true}})
	openSession(t, synth.SessionOptions{}) // with build IDs, newer
	runTrue(t, 20)
	var maps, leaked int
	readFlushed(t, plain, func(r *synth.Record) {
		if r.Kind != synth.KindLive || r.Type() != perfdata.RecordMmap2 {
			return
		}
		maps++
		if perfdata.Mmap2View(r.Raw).HasBuildID() {
			leaked++
		}
	})
	if maps == 0 {
		t.Fatal("no live MMAP2 of /bin/true's runs")
	}
	if leaked > 0 {
		t.Errorf("%d of %d MMAP2 records of a session without build IDs carry the build-ID bit", leaked, maps)
	}
}

// perf record without build IDs, with a synth session with them opened
// after it, writes MMAP2 records with the build-ID bit over the maj/min/ino
// form: perf 6.1's report aborts on them (util/build-id.c:1010) when the
// device's major number is over 20. This is how TestPidNamespace's perf
// report once aborted in CI: synth inject's rings open after perf's.
// Inject takes the bit off perf's records, keeping their device and
// inode, and perf report reads the output.
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
	openSession(t, synth.SessionOptions{})
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
