package synth

import "github.com/synth-dev/synth/internal/config"

// Target selects the processes a dump, a Session or a Profile covers
// (Options.Target), as perf record's target options do. The zero Target
// is the whole host; at most one field may be set.
type Target = config.Target

// ErrNoProcess is the error of a target that names no task.
var ErrNoProcess = config.ErrNoProcess

// ErrNoMatch is the error of a user or cgroup target that no process
// matches.
var ErrNoMatch = config.ErrNoMatch

// Processes returns the processes that ids name, ascending and each
// once: the id of a thread names its process, as perf's -p does. An id
// that names no task is an error that names it and satisfies
// errors.Is(err, ErrNoProcess).
func Processes(ids []int) ([]int, error) { return config.Processes(ids) }
