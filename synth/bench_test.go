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
		{"data", synth.Options{Data: true}},
		{"exec-nokernel", synth.Options{NoKernel: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			testenv.Root(b)
			d, err := synth.NewBPF(bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			var st synth.Stats
			for b.Loop() {
				st, err = d.Dump(context.Background(), func([]byte) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.Mappings), "mappings")
			b.ReportMetric(float64(st.Records), "records")
		})
	}
}
