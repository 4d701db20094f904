package profconv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/synth-dev/synth/profconv"
	"github.com/synth-dev/synth/synth"
)

// An agent: a whole-host Session with samples, whose records feed a
// Converter, exports a pprof profile every second (here two of them)
// and starts the next from the same process table.
func Example_agent() {
	s, err := synth.NewSession(synth.SessionOptions{Sample: &synth.SampleOptions{Freq: 999, Callchain: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Dump(ctx); err != nil {
		fmt.Println(err)
		return
	}
	c, err := profconv.New(s.Attrs(), profconv.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var rec synth.Record
	for exported := 0; exported < 2; {
		if err := s.ReadContext(ctx, &rec); err != nil {
			fmt.Println(err)
			return
		}
		if err := c.Add(&rec); err != nil {
			fmt.Println(err)
			return
		}
		select {
		case <-tick.C:
		default:
			continue
		}
		if c.Stats().Samples == 0 {
			continue // nothing sampled yet: no profile to send
		}
		p, err := c.Profile()
		if err != nil {
			fmt.Println(err)
			return
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pb.gz", exported)))
		if err != nil {
			fmt.Println(err)
			return
		}
		err = p.Write(f) // or c.OTLP() and profconv.Send to a collector
		f.Close()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("profile %d: %s, samples: %v\n", exported, p.SampleType[1].Type, len(p.Sample) > 0)
		exported++
		c.Reset()
	}
	// Output:
	// profile 0: cpu-clock, samples: true
	// profile 1: cpu-clock, samples: true
}
