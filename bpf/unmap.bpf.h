/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Unmaps between dumps, for a Session's Table: perf has no record of an
 * unmap, so a Table learns of one only from the next dump. These
 * programs report, as a synth-private record in rings of their own
 * (unmap_events), the range a successful munmap(2) or mremap(2) took
 * away, and where mremap put it; and the range that mprotect(2), or a MAP_FIXED mmap(2), left
 * without PROT_EXEC. Userspace hands them to the library's stream and
 * never to perf.data.
 *
 * Each fills a gap in what the kernel reports (perf_event_mmap() in
 * mm/mmap.c, mm/mprotect.c): mremap reports nothing of the mapping it
 * moved or resized, and a mapping that stops being executable is
 * reported only to events that ask for data mappings (mmap_data), which
 * a Session of executable mappings does not. The loader does the last
 * for every library whose text comes first (arm64's, linked for 64K
 * pages): it maps the whole library r-x, then the gaps PROT_NONE and the
 * data MAP_FIXED over the end.
 *
 * The programs are in synth.bpf.c; this file has what they share. They
 * hang on the syscalls' tracepoints, which any kernel built with
 * CONFIG_FTRACE_SYSCALLS has (Debian's do) and lockdown allows, unlike
 * fentry. The enter notes the arguments, per thread; the exit reports the
 * range if the call succeeded. Ranges that change by other means are not
 * seen here, and wait for the next dump: exec and exit (COMM, EXIT),
 * brk(2) shrinking the heap, shmdt(2), pkey_mprotect(2), a kernel thread
 * working on a process's behalf.
 */
#ifndef SYNTH_UNMAP_BPF_H
#define SYNTH_UNMAP_BPF_H

#include "record.bpf.h"

#define MREMAP_DONTUNMAP 4     /* include/uapi/linux/mman.h */
#define MAP_FIXED 0x10         /* include/uapi/asm-generic/mman-common.h */
#define MAX_ERRNO 4095         /* include/linux/err.h */

enum unmap_call_kind { CALL_MUNMAP, CALL_MREMAP, CALL_MPROTECT, CALL_MMAP };

/* The unmap records' rings, one per CPU, apart from the dumps' (events):
 * the dumps' pacing bounds what the iterators write between two drains,
 * and knows nothing of the unmaps any process makes meanwhile, so a
 * storm of them in the same rings would cost a dump its records. A
 * record a full ring refuses here is an unmap missed (unmaps_missed),
 * and nothing else. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} unmap_events SEC(".maps");

/* The arguments of a call under way, by thread. An exit reports only
 * the call its thread's enter noted: the kernel skips a tracepoint
 * program now and then (below), and a note whose exit was skipped must
 * not be taken for the next call's. An entry whose exit never comes
 * (the thread was killed) ages out. */
struct unmap_call {
	__u64 addr;    /* mmap's is where it asked for (MAP_FIXED: got) */
	__u64 len;     /* mremap's old_len */
	__u64 new_len; /* mremap's */
	__u32 flags;   /* mremap's */
	enum unmap_call_kind kind;
	__s32 nr;      /* the syscall's number, as its exit sees it */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct unmap_call);
} unmap_calls SEC(".maps");

/* Calls whose change the stream will not report: the note or the record
 * could not be written (a full ring). The kernel counts the other way
 * one is missed, a program it skipped, in the program's recursion_misses:
 * trace_call_bpf() runs none while another tracing program, or a map
 * operation from userspace, has bpf_prog_active on the CPU. Userspace
 * adds both up (UnmapMisses). */
__u64 unmaps_missed;

/* A syscalls:sys_enter_* and sys_exit_* program's context, as
 * perf_call_bpf_enter() and perf_call_bpf_exit() build it
 * (kernel/trace/trace_syscalls.c): the syscall's number is an int and the
 * padding after it is not set, which trace_event_raw_sys_enter's long id
 * would read. */
struct syscall_enter_ctx {
	struct trace_entry ent;
	int nr;
	unsigned long args[6];
};

struct syscall_exit_ctx {
	struct trace_entry ent;
	int nr;
	long ret;
};

/* The reader's pid namespace, for the programs that run in other tasks:
 * note_reader (synth.bpf.c) sets it, and reader_known, once before they
 * are attached. The namespace of a process does not change. */
__u32 reader_known;
__u32 reader_level;
__u64 reader_ns;

static __always_inline __u64 page_align(__u64 len)
{
	__u64 page = 1ULL << page_shift;

	return (len + page - 1) & ~(page - 1);
}

static __always_inline void note_call(struct syscall_enter_ctx *ctx, __u64 new_len, __u32 flags, __u32 kind)
{
	struct unmap_call c = {
		.addr = ctx->args[0],
		.len = ctx->args[1],
		.new_len = new_len,
		.flags = flags,
		.kind = kind,
		.nr = ctx->nr,
	};
	__u64 id = bpf_get_current_pid_tgid();

	if (bpf_map_update_elem(&unmap_calls, &id, &c, BPF_ANY))
		__sync_fetch_and_add(&unmaps_missed, 1);
}

/* A call of the syscall that is not noted drops a note of its own
 * syscall left by a call whose exit was skipped: its exit would report
 * that call's range again, now. */
static __always_inline void drop_call(void)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (bpf_map_lookup_elem(&unmap_calls, &id))
		bpf_map_delete_elem(&unmap_calls, &id);
}

/* What a successful call changed, into r; false if nothing a Table
 * holds: a failed call, an empty range, MREMAP_DONTUNMAP (the old range
 * stays, the new one is anonymous) or mremap's old_len 0 (a second
 * mapping of shared memory). munmap: [start, end) went. mremap: it went,
 * and the mapping that held start now spans [to, to_end) at the address
 * the call returned, moved or resized in place alike. mprotect and mmap:
 * [start, end) is no longer executable. */
static __always_inline bool changed(const struct unmap_call *c, long ret, struct synth_unmap *r)
{
	__u64 len = page_align(c->len);

	if ((unsigned long)ret >= (unsigned long)-MAX_ERRNO || !len)
		return false;
	r->start = c->addr;
	r->end = c->addr + len;
	r->what = SYNTH_UNMAP_GONE;
	switch (c->kind) {
	case CALL_MUNMAP:
		return true;
	case CALL_MREMAP:
		if (c->flags & MREMAP_DONTUNMAP)
			return false;
		r->to = ret;
		r->to_end = ret + page_align(c->new_len);
		return true;
	default: /* mprotect, mmap */
		r->what = SYNTH_UNMAP_NOEXEC;
		return true;
	}
}

/* The exit of any of the calls: the arguments the enter noted say
 * which, if the enter was this call's. */
static __always_inline void report(struct syscall_exit_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct unmap_call *c = bpf_map_lookup_elem(&unmap_calls, &id);
	struct synth_unmap r = {};
	struct pidns ns;
	bool ok;

	if (!c)
		return;
	ok = c->nr == ctx->nr && changed(c, ctx->ret, &r);
	bpf_map_delete_elem(&unmap_calls, &id);
	if (!ok || !reader_known)
		return;
	ns.level = reader_level;
	ns.ns = (struct pid_namespace *)reader_ns;
	pidns_task((struct task_struct *)bpf_get_current_task(), &ns, &r.pid, &r.tid);
	if (!r.pid)
		return; /* a process the reader's namespace does not see */
	r.h.gen = synth_gen;
	r.h.time = bpf_ktime_get_ns();
	r.header.type = SYNTH_RECORD_UNMAP;
	r.header.size = sizeof(r) - sizeof(r.h);
	if (bpf_perf_event_output(ctx, &unmap_events, BPF_F_CURRENT_CPU, &r, sizeof(r)))
		__sync_fetch_and_add(&unmaps_missed, 1);
}

#endif /* SYNTH_UNMAP_BPF_H */
