package synth_test

import (
	"context"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// BenchmarkDump measures one whole-host dump with loaded programs; the
// records are decoded by no one. Compare with perf's own synthesis by
// running `perf bench internals synthesize --mt` on the same host.
func BenchmarkDump(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts synth.Options
	}{
		{"exec", synth.Options{}},
		{"exec-nobuildid", synth.Options{NoBuildID: true}},
		{"data", synth.Options{Data: true}},
		{"data-nobuildid", synth.Options{Data: true, NoBuildID: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			testenv.Root(b)
			d, err := synth.NewBPF(bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			// The first dump fills the build-ID cache; the loop measures
			// dumps with a warm cache, as a profiler's repeated dumps.
			first, err := d.Dump(context.Background(), func([]byte) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
			var st synth.Stats
			for b.Loop() {
				st, err = d.Dump(context.Background(), func([]byte) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.Mappings), "mappings")
			b.ReportMetric(float64(st.Records), "records")
			b.ReportMetric(float64(first.ELFReads), "elf-reads-first")
			b.ReportMetric(float64(st.ELFReads), "elf-reads-later")
			b.ReportMetric(float64(first.Elapsed.Microseconds()), "first-µs")
		})
	}
}
