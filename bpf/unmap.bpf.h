/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Unmaps between dumps, for a Session's Table: perf has no record of an
 * unmap, so a Table learns of one only from the next dump. These
 * programs report, as a synth-private record in the programs' rings, the
 * range a successful munmap(2) or mremap(2) took away, and where mremap
 * put it; and the range that mprotect(2), or a MAP_FIXED mmap(2), left
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
 * They hang on the syscalls' tracepoints, which any kernel built with
 * CONFIG_FTRACE_SYSCALLS has (Debian's do) and lockdown allows, unlike
 * fentry. The enter notes the arguments, per thread; the exit reports the
 * range if the call succeeded. Ranges that change by other means are not
 * seen here, and wait for the next dump: exec and exit (COMM, EXIT),
 * brk(2) shrinking the heap, shmdt(2), pkey_mprotect(2), a kernel thread
 * working on a process's behalf.
 */
#ifndef SYNTH_UNMAP_BPF_H
#define SYNTH_UNMAP_BPF_H

#define MREMAP_DONTUNMAP 4     /* include/uapi/linux/mman.h */
#define MAP_FIXED 0x10         /* include/uapi/asm-generic/mman-common.h */
#define MAX_ERRNO 4095         /* include/linux/err.h */

enum unmap_call_kind { CALL_MUNMAP, CALL_MREMAP, CALL_MPROTECT, CALL_MMAP };

/* The arguments of a call under way, by thread. An entry whose exit
 * never comes (the thread was killed) ages out. */
struct unmap_call {
	__u64 addr;    /* mmap's is where it asked for (MAP_FIXED: got) */
	__u64 len;     /* mremap's old_len */
	__u64 new_len; /* mremap's */
	__u32 flags;   /* mremap's */
	__u32 kind;    /* enum unmap_call_kind */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct unmap_call);
} unmap_calls SEC(".maps");

static __always_inline __u64 page_align(__u64 len)
{
	__u64 page = 1ULL << page_shift;

	return (len + page - 1) & ~(page - 1);
}

static __always_inline void note_call(__u64 addr, __u64 len, __u64 new_len, __u32 flags, __u32 kind)
{
	struct unmap_call c = { .addr = addr, .len = len, .new_len = new_len, .flags = flags, .kind = kind };
	__u64 id = bpf_get_current_pid_tgid();

	bpf_map_update_elem(&unmap_calls, &id, &c, BPF_ANY);
}

SEC("tracepoint/syscalls/sys_enter_munmap")
int enter_munmap(struct trace_event_raw_sys_enter *ctx)
{
	note_call(ctx->args[0], ctx->args[1], 0, 0, CALL_MUNMAP);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mremap")
int enter_mremap(struct trace_event_raw_sys_enter *ctx)
{
	note_call(ctx->args[0], ctx->args[1], ctx->args[2], ctx->args[3], CALL_MREMAP);
	return 0;
}

/* Only a call that leaves a range without PROT_EXEC is noted: one that
 * makes it executable is reported by the kernel (an MMAP2). */
SEC("tracepoint/syscalls/sys_enter_mprotect")
int enter_mprotect(struct trace_event_raw_sys_enter *ctx)
{
	if (!(ctx->args[2] & PROT_EXEC))
		note_call(ctx->args[0], ctx->args[1], 0, 0, CALL_MPROTECT);
	return 0;
}

/* Only a MAP_FIXED mapping can land on one that exists. */
SEC("tracepoint/syscalls/sys_enter_mmap")
int enter_mmap(struct trace_event_raw_sys_enter *ctx)
{
	if ((ctx->args[3] & MAP_FIXED) && !(ctx->args[2] & PROT_EXEC))
		note_call(ctx->args[0], ctx->args[1], 0, 0, CALL_MMAP);
	return 0;
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

/* The exit of any of the calls: the arguments the enter noted say which. */
static __always_inline void report(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct unmap_call *c = bpf_map_lookup_elem(&unmap_calls, &id);
	struct synth_unmap r = {};
	struct pidns ns;
	bool ok;

	if (!c)
		return;
	ok = changed(c, ctx->ret, &r);
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
	bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, &r, sizeof(r));
}

SEC("tracepoint/syscalls/sys_exit_munmap")
int exit_munmap(struct trace_event_raw_sys_exit *ctx)
{
	report(ctx);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mremap")
int exit_mremap(struct trace_event_raw_sys_exit *ctx)
{
	report(ctx);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mprotect")
int exit_mprotect(struct trace_event_raw_sys_exit *ctx)
{
	report(ctx);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mmap")
int exit_mmap(struct trace_event_raw_sys_exit *ctx)
{
	report(ctx);
	return 0;
}

#endif /* SYNTH_UNMAP_BPF_H */
