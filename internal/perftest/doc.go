// Package perftest holds the helpers of the tests that hold synth's
// perf.data files against perf: running perf (and the tools around it)
// away from the user's ~/.debug and config, perf's own recording of the
// host, reading a file's records, and reading back the mappings perf
// prints. Package synth's tests, which compare what the library writes
// with perf, and cmd/synth's, which compare what the command writes, use
// them.
package perftest
