package perftest

import (
	"io"
	"os"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// Ungrow repairs, in place, the KSYMBOL, BPF_EVENT and TEXT_POKE records
// of perf's own recording at path that the kernel grew (perfdata.TrimGrown
// says how; docs/kernel/sideband-sizes.md why): perf wrote them as its
// rings held them, and refuses them ("failed to process type: 17"). A
// test that records with perf beside another profiler that loads BPF
// programs (synth inject's, another perf) meets them on a kernel with the
// bug. The records keep their sizes, so the file's sections stay where
// they are; each one's trailer, which the kernel wrote right after its
// body, is copied to its end, where perf reads it. It returns how many
// records it repaired. Only perf's reference files are repaired: a file
// synth wrote must come out whole on its own.
func Ungrow(t testing.TB, path string) int {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	rd, err := perfdata.NewReader(f, fi.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	st, n := rd.SampleType(), 0
	ids := perfdata.SampleIDSize(st)
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		size, err := perfdata.TrueSize(rec.Data, st)
		if err != nil || size == len(rec.Data) || ids == 0 {
			continue
		}
		trailer := append([]byte(nil), rec.Data[size-ids:size]...)
		if _, err := f.WriteAt(trailer, rec.Off+int64(len(rec.Data)-ids)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n > 0 {
		t.Logf("%s: %d KSYMBOL, BPF_EVENT or TEXT_POKE records the kernel grew (another profiler beside perf): trailers moved to their ends", path, n)
	}
	return n
}
