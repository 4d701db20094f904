// Command mmapids prints the MMAP2 records of a perf.data file, one a
// line: "PID ID FILENAME", ID the build ID in hex, or "-" for a record
// of the maj/min/ino form. It reads with the repository's reader, which
// walks the records by their header's size, as the kernel wrote them,
// and so reads past a KSYMBOL record whose size the kernel grew, where
// perf 6.1 stops.
package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/synth-dev/synth/perfdata"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mmapids perf.data")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "mmapids:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	rd, err := perfdata.NewReader(f, st.Size())
	if err != nil {
		return err
	}
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		m := perfdata.Mmap2View(rec.Data)
		if rec.Type != perfdata.RecordMmap2 || !m.Fits() {
			continue
		}
		id := "-"
		if m.HasBuildID() {
			id = hex.EncodeToString(m.BuildID())
		}
		fmt.Printf("%d %s %s\n", m.Pid(), id, m.Filename())
	}
}
