// Package loadgen starts light processes with many VMAs, for benchmarks:
// file-backed executable mappings of real shared libraries, read-only and
// writable data mappings, and anonymous ones, with protections alternating
// page by page so that the kernel cannot merge them.
//
// The processes are the calling binary re-executed: a program that uses
// loadgen calls Main first thing in main.
package loadgen
