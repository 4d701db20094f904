package perftest

import (
	"io"
	"os"
	"slices"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// Record is a record of a perf.data with the trailer type it has.
type Record struct {
	perfdata.Record
	SampleType uint64
}

// ReadRecords reads every record of a perf.data.
func ReadRecords(t testing.TB, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	rd, err := perfdata.NewReader(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var recs []Record
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rec.Data = slices.Clone(rec.Data)
		recs = append(recs, Record{rec, rd.SampleType()})
	}
}
