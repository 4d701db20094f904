// ksz prints, for each KSYMBOL, BPF_EVENT and TEXT_POKE record of
// perf.data files, its size minus its true size, as a histogram.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/synth-dev/synth/perfdata"
)

func main() {
	hist := map[int]int{}
	for _, p := range os.Args[1:] {
		f, err := os.Open(p)
		if err != nil {
			panic(err)
		}
		fi, _ := f.Stat()
		rd, err := perfdata.NewReader(f, fi.Size())
		if err != nil {
			fmt.Fprintln(os.Stderr, p, err)
			continue
		}
		st := rd.SampleType()
		if rd.Attrs()[0].Attr.Flags&perfdata.AttrSampleIDAll == 0 {
			st = 0
		}
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, p, err)
				break
			}
			switch rec.Type {
			case perfdata.RecordKsymbol, perfdata.RecordBPFEvent, perfdata.RecordTextPoke:
				n, err := perfdata.TrueSize(rec.Data, st)
				if err != nil {
					fmt.Fprintln(os.Stderr, p, err)
					continue
				}
				hist[len(rec.Data)-n]++
				if len(rec.Data) > n && os.Getenv("KSZ_V") != "" {
					if rec.Type == perfdata.RecordKsymbol {
						t, _, _ := perfdata.TrimGrown(append([]byte(nil), rec.Data...), st)
						k, sid, _ := perfdata.ParseKsymbol(t, st)
						fmt.Println("grown", len(rec.Data)-n, "KSYMBOL", k.Name, "pid", sid.Pid, "time", sid.Time)
					} else {
						fmt.Println("grown", len(rec.Data)-n, rec.Type)
					}
				}
			}
		}
		f.Close()
	}
	var ks []int
	for k := range hist {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	for _, k := range ks {
		fmt.Printf("grown by %d: %d\n", k, hist[k])
	}
}
