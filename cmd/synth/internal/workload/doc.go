// Package workload starts the command a profiler records, the way perf
// record does: the child exists (and so has a pid to follow) before it
// runs the command, and runs it only when the profiler says go, so that
// none of the command's life goes unrecorded.
//
// The child is the profiler's own binary, re-executed: a program that
// uses Start calls Main first thing in main.
package workload
