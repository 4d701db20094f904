package assemble

import (
	"fmt"

	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// Cgroups emits, with Options.Cgroups, a PERF_RECORD_CGROUP for every
// cgroup of the hierarchy perf uses, parents first, as perf record
// --all-cgroups synthesizes them before the tasks: the records name the
// ids that samples with PERF_SAMPLE_CGROUP carry.
func (d *Assembler) Cgroups() error {
	if !d.opts.Cgroups {
		return nil
	}
	fs, err := procfs.FindCgroupFS()
	if err != nil {
		return err
	}
	err = fs.Walk(func(id uint64, path string) error {
		c := perfdata.Cgroup{ID: id, Path: path}
		d.buf = c.Append(d.buf[:0], d.sampleType, d.sampleID(0, 0))
		d.Stats.Cgroups++
		d.Stats.Records++
		return d.Emit(d.buf)
	})
	if err != nil {
		return fmt.Errorf("synthesize cgroups: %w", err)
	}
	return nil
}
