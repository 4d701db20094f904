package procmethod

import (
	"fmt"
	"os"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/procfs"
)

// NewProcmaps returns the procmaps method: it parses /proc/PID/maps and
// the task comms with a pool of threads workers, as perf's
// --num-thread-synthesize does. It needs no privilege beyond reading
// those files. Build IDs are read from the files, once per file per
// dump, as procquery reads them, so that every method writes the same
// records: the fallback of kernels without PROCMAP_QUERY too.
func NewProcmaps(opts config.Resolved, threads int) (*Method, error) {
	m, err := newProcMethod(config.MethodProcmaps, opts, threads, func(o *config.Resolved) mapReader {
		return &mapsReader{execOnly: !o.Data}
	})
	if err != nil {
		return nil, err
	}
	m.ids = newProcIDs(opts.BuildIDWait())
	return m, nil
}

// mapsReader parses /proc/PID/maps in place (procfs.MapsScanner): a
// line that is not executable is dropped on its permission column,
// and no line is copied.
type mapsReader struct {
	scan     procfs.MapsScanner
	execOnly bool
}

func (r *mapsReader) read(pid int, fn func(*procfs.Mapping)) error {
	f, err := os.Open(pidPath(pid, "maps"))
	if err != nil {
		return fmt.Errorf("read maps of pid %d: %w", pid, err)
	}
	defer f.Close()
	err = r.scan.Scan(f, r.execOnly, fn)
	if err != nil {
		return fmt.Errorf("read maps of pid %d: %w", pid, err)
	}
	return nil
}
