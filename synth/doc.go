// Package synth synthesizes perf records for the state that already
// exists on a Linux host: a PERF_RECORD_MMAP2 for every memory mapping of
// every process, COMM and FORK for every task, plus the kernel's own
// maps, in the order `perf record` synthesizes them. A synthesized FORK
// carries PERF_RECORD_MISC_FORK_EXEC, as perf's do: a leader's names its
// parent process (0 for init and kthreadd), another thread's its leader.
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
// is full come as PERF_RECORD_LOST, as perf writes them. With
// SessionOptions.Unmaps a third ring per CPU carries the unmap records,
// so that no number of them costs a dump a record. Profile is a
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
// A profiler's read path: Session.Read hands out each record, samples
// and synth's own KindUnmap included; Table.Apply takes every one;
// Record.Sample decodes a sample under its event's attr; and
// Table.Resolve says which mapping holds its IP, and in a file's the
// file offset and build ID: it takes the sample's Pid (the process,
// not the thread, Tid) and IP, t.Resolve(s.Pid, s.IP).
//
// NewSession starts the live stream but dumps nothing by itself: the
// state that already exists comes from Session.Dump, which the caller
// runs once after NewSession (and again when it wants a fresh view, or
// when records were lost). A Read blocks until a record comes; a loop
// that must wake every second (to flush, or to watch for a stop) calls
// ReadContext with a context.WithTimeout of one second and treats
// context.DeadlineExceeded as "nothing yet", or sets SetDeadline from
// another goroutine. A perfdata.Writer takes Raw as it is, but
// for KindDumpEnd (no Raw) and KindUnmap (refused with
// perfdata.ErrPrivateRecord): a loop that writes the stream skips both.
// What lives how long:
//   - Record.Raw is the session's: valid until the next Read,
//     ReadContext or ReadBatch. Record.Sample's and Record.Unmapped's
//     results are copies.
//   - A *Process of a Table stays the same process until the table
//     removes it (its EXIT, or a dump of every process that did not
//     read it); its Mappings slice, and a *Mapping that Process.Lookup
//     returns, only until the next Apply, which may reuse the slice for
//     other mappings. A Location of Table.Resolve is the caller's.
//
// A Session's Read must not be called concurrently (its Close, Flush
// and SetDeadline may be, from any goroutine). A Table is not safe for
// concurrent use: a profiler that applies records in one goroutine and
// resolves samples in another guards it with a lock.
//
// BPF runs as root, or with CAP_BPF and CAP_PERFMON; without them
// OpenMethod and NewSession return a *PermissionError naming what is
// missing.
package synth
