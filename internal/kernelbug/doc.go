// Package kernelbug holds the reproducers of the kernel bugs synth works
// around, each written up with its patch under docs/kernel in the
// repository. It has no code of its own: its tests open perf events with
// perf_event_open(2), as any profiler does, make the kernel report
// something, and read the records it wrote, without synth's engine.
//
// Each test passes where the kernel has the bug, showing it, and skips
// where the kernel is fixed, naming the bug; it fails where the kernel
// does something neither the bug nor the fix explains.
//
// The bugs are in the side-band output of kernel/events/core.c. The
// kernel builds one record for a side-band event (an mmap, a kernel
// symbol, a BPF program load, a patch of kernel text) and hands it to
// every perf event that listens, newest first (perf_iterate_sb). Each
// listener's output function fills in that shared record for its event;
// some do not undo what they changed, so every listener served after
// gets a record shaped for another event:
//
//   - perf_event_mmap_output() sets PERF_RECORD_MISC_MMAP_BUILD_ID for
//     an event with attr.build_id and never clears it;
//   - perf_event_ksymbol_output(), perf_event_bpf_output() and
//     perf_event_text_poke_output() add the event's sample_id trailer
//     size to header.size and never take it off.
//
// The tests open their events on their own thread (pid = the thread,
// cpu = -1): the kernel serves a task's events the same records through
// the same output functions as per-CPU ones, and such events hear
// nothing of the other processes on the host, so the verdict depends on
// nothing but the test's own system calls.
package kernelbug
