// Package assemble holds what every method of synth shares: the
// Assembler, which puts the records a method finds into perf's order
// (per process, its COMM and FORK records, then its MMAP2 records, pids
// ascending), appends their sample_id_all trailers, and adds what no
// method reads from a process: the kernel's and modules' maps, and the
// [vsyscall] area /proc shows. The options and statistics of a dump are
// internal/config's.
package assemble
