package synth

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/synth-dev/synth/internal/procfs"
)

// ErrNoProcess is the error of a target that names no task.
var ErrNoProcess = errors.New("no such process")

// Processes returns the processes that ids name, ascending and each
// once: the id of a thread names its process, as perf's -p does. An id
// that names no task is an error that names it and satisfies
// errors.Is(err, ErrNoProcess).
func Processes(ids []int) ([]int, error) {
	var pids []int
	for _, id := range ids {
		tgid, err := procfs.Tgid(id)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %d", ErrNoProcess, id)
		}
		if err != nil {
			return nil, err
		}
		pids = append(pids, tgid)
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}
