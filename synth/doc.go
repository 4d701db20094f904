// Package synth synthesizes perf records for the state that already
// exists on a Linux host: a PERF_RECORD_MMAP2 for every memory mapping of
// every process, COMM for every task and FORK for every non-leader
// thread, plus the kernel's own maps, in the order `perf record`
// synthesizes them.
//
// The BPF method reads the tasks and their VMAs inside the kernel, in one
// pass of a task iterator that walks each process's VMA tree and
// validates the walk (Options.Walk; the task_vma iterator is the
// fallback), and streams ready-made records in batches through per-CPU
// perf ring buffers of their own. Each dump carries a generation number;
// records of another generation are dropped. The programs pace
// themselves through the iterator's seq_file, so a dump loses no records
// whatever the ring size (Options.RingPages, at least MinRingPages).
//
// A Session is what a perf-like tool embeds: a second ring per CPU
// carries the kernel's live MMAP2, COMM, FORK and EXIT records (and, with
// SessionOptions.Sample, cpu-clock samples), and the Session merges both
// into one ordered stream that holds the state each dump read and every
// change after it. Within a generation a mapping is reported once: a
// synthesized record that the live stream reported first is dropped. The
// kernel reports a mapping under the process's mmap write lock and the
// walk reads a process while no writer holds it, so their times, on one
// clock, order the two exactly. Live records the kernel drops when a ring
// is full come as PERF_RECORD_LOST, as perf writes them. Profile is a
// minimal perf record built on it; synth dump writes one generation of a
// Session.
//
// Options.Target names what a dump, a Session and a Profile cover, once,
// as perf record's -p, -t, -u and -G do: the dump, the live stream and
// the sampling event all follow it. It is resolved to processes when the
// method or the session opens.
//
// Snapshot and Table give a profiler what it keeps: every process with
// its mappings as typed values, build IDs included, kept current by
// applying a Session's records. Inject adds one dump's state to the
// pipe of an unmodified `perf record -o -`, as synth inject does.
//
// BPF runs as root, or with CAP_BPF and CAP_PERFMON; without them
// OpenMethod and NewSession return a *PermissionError naming what is
// missing.
package synth
