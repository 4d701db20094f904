// Package profconv turns perf.data, synth's or perf record's own (file
// or pipe mode), or a Session's records, into a pprof profile
// (github.com/google/pprof/profile) and an OpenTelemetry profiles
// request (go.opentelemetry.io/collector/pdata/pprofile), the formats
// that fleets' profilers read.
//
// It reads with perfdata and resolves with synth's Table: each sample's
// frames are placed in the mappings its process had when it was taken
// (the records before it in the file). Samples are aggregated by stack,
// process and thread, each with two values per event: the count of
// samples and their summed period. A mapping keeps its file name,
// range, file offset and build ID: the MMAP2 record's, else the
// HEADER_BUILD_ID section's for its name (perf's own files), else the
// file's at hand when its device and inode are the record's. Frames
// are named from the file's ELF symbol tables (.symtab, .dynsym: what
// perf report reads without debug info) only when the file at hand is
// provably the one mapped; one replaced since lends neither its
// symbols nor its build ID, and is counted (Stats.WrongFile). Kernel
// frames are named from /proc/kallsyms only when the file was recorded
// on the running kernel. Addresses stay, so a backend can symbolize
// again.
//
// The package is apart from synth and perfdata because of what it
// imports: pprof's profile package and the collector's pdata add about
// 6 MB to a binary and a dozen modules to go.mod, which a program that
// only dumps or records does not need. It leaves out pprofileotlp,
// which would add gRPC: Marshal writes the same bytes.
package profconv
