// Package synth synthesizes perf records for the state that already
// exists on a Linux host: a PERF_RECORD_MMAP2 for every memory mapping of
// every process, COMM for every task and FORK for every non-leader
// thread, plus the kernel's own maps, in the order `perf record`
// synthesizes them.
//
// The BPF method walks the tasks and their VMAs with BPF iterators
// (iter/task and iter/task_vma) inside the kernel and streams ready-made
// records through per-CPU perf ring buffers. Each dump carries a
// generation number; records of another generation are dropped. The
// programs pace themselves through the iterator's seq_file, so a dump
// loses no records whatever the ring size (Options.RingPages, at least
// MinRingPages).
//
// A Session is what a perf-like tool embeds: the same rings also carry
// the kernel's live MMAP2, COMM, FORK and EXIT records (and, with
// SessionOptions.Sample, cpu-clock samples), so that one ordered stream
// holds the state each dump read and every change after it. Within a
// generation a mapping is reported once: a synthesized record that the
// live stream reported first is dropped (see DESIGN.md, "The generation
// number and the dedupe rule"). Profile is a minimal perf record built on
// it; synth dump writes one generation of a Session.
//
// BPF runs as root, or with CAP_BPF and CAP_PERFMON; without them NewBPF
// and NewSession return a *PermissionError naming what is missing.
package synth
