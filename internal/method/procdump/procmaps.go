package procdump

import (
	"github.com/synth-dev/synth/internal/dump"
	"github.com/synth-dev/synth/internal/procfs"
)

// NewProcmaps returns the procmaps method: it parses /proc/PID/maps and
// the task comms with a pool of threads workers, as perf's
// --num-thread-synthesize does. It needs no privilege beyond reading
// those files, and provides no build IDs.
func NewProcmaps(opts dump.Options, threads int) (*Method, error) {
	return newProcMethod("procmaps", opts, threads, func(pid int) ([]procMapping, error) {
		maps, err := procfs.ReadMaps(pid)
		if err != nil {
			return nil, err
		}
		out := make([]procMapping, len(maps))
		for i, m := range maps {
			out[i] = procMapping{Mapping: m}
		}
		return out, nil
	})
}
