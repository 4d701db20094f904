package synth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

func openSession(t *testing.T, opts synth.SessionOptions) *synth.Session {
	t.Helper()
	testenv.Root(t)
	s, err := synth.NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readDump reads a dump's synthesized records up to its end.
func readDump(t *testing.T, s *synth.Session) []perfdata.Mmap2 {
	t.Helper()
	var rec synth.Record
	var maps []perfdata.Mmap2
	st := s.Attrs()[0].Attr.SampleType
	for {
		if err := s.ReadInto(&rec); err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case synth.KindDumpEnd:
			return maps
		case synth.KindSynthesized:
			if rec.Type() == perfdata.RecordMmap2 {
				m, _, err := perfdata.ParseMmap2(rec.Raw, st)
				if err != nil {
					t.Fatal(err)
				}
				maps = append(maps, m)
			}
		}
	}
}

// A session dumps this process, then reports a file it maps afterwards
// live, once, in the dump's generation.
func TestSessionLiveMmap(t *testing.T) {
	s := openSession(t, synth.SessionOptions{Options: synth.Options{Pids: []int{os.Getpid()}, Data: true}})
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	if maps := readDump(t, s); len(maps) == 0 {
		t.Fatal("dump of this process has no mappings")
	}
	path := filepath.Join(t.TempDir(), "live-mapped")
	if err := os.WriteFile(path, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 8192, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	s.SetDeadline(time.Now().Add(5 * time.Second))
	var rec synth.Record
	st := s.Attrs()[0].Attr.SampleType
	for {
		if err := s.ReadInto(&rec); err != nil {
			t.Fatalf("no live record of %s: %v", path, err)
		}
		if rec.Kind != synth.KindLive || rec.Type() != perfdata.RecordMmap2 {
			continue
		}
		m, _, err := perfdata.ParseMmap2(rec.Raw, st)
		if err != nil {
			t.Fatal(err)
		}
		if m.Filename == path {
			if rec.Gen != 1 || rec.Time == 0 || m.Len != 8192 {
				t.Errorf("live record gen %d time %d len %d", rec.Gen, rec.Time, m.Len)
			}
			break
		}
	}
	s.Flush()
	for {
		err := s.ReadInto(&rec)
		if errors.Is(err, synth.ErrFlushed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Lost != 0 || st.Synthesized == 0 || st.Live == 0 {
		t.Errorf("stats %+v", st)
	}
}
