/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Unmaps between dumps, for a Session's Table: perf has no record of an
 * unmap, so a Table learns of one only from the next dump. These
 * programs report the range a successful munmap(2) or mremap(2) took
 * away, and where mremap put it, as a synth-private record in the
 * programs' rings; userspace hands it to the library's stream and never
 * to perf.data. mremap needs the second half: the kernel reports no MMAP2
 * for a mapping it moved or resized (mm/mremap.c calls no
 * perf_event_mmap), so perf's own view goes stale there too.
 *
 * They hang on the syscalls' tracepoints, which any kernel built with
 * CONFIG_FTRACE_SYSCALLS has (Debian's do) and lockdown allows, unlike
 * fentry. The enter notes the arguments, per thread; the exit reports the
 * range if the call succeeded. Ranges that go by other means are not seen
 * here, and wait for the next dump: a mapping placed over them (its MMAP2
 * says so), exec and exit (COMM, EXIT), brk(2) shrinking the heap,
 * shmdt(2), an unmap by a kernel thread on a process's behalf.
 */
#ifndef SYNTH_UNMAP_BPF_H
#define SYNTH_UNMAP_BPF_H

#define MREMAP_DONTUNMAP 4 /* include/uapi/linux/mman.h */
#define MAX_ERRNO 4095     /* include/linux/err.h */

/* The arguments of a munmap or mremap under way, by thread. An entry
 * whose exit never comes (the thread was killed) ages out. */
struct unmap_call {
	__u64 addr;
	__u64 len;     /* munmap's length, mremap's old_len */
	__u64 new_len; /* mremap's */
	__u32 flags;   /* mremap's */
	__u32 mremap;
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

SEC("tracepoint/syscalls/sys_enter_munmap")
int enter_munmap(struct trace_event_raw_sys_enter *ctx)
{
	struct unmap_call c = { .addr = ctx->args[0], .len = ctx->args[1] };
	__u64 id = bpf_get_current_pid_tgid();

	bpf_map_update_elem(&unmap_calls, &id, &c, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mremap")
int enter_mremap(struct trace_event_raw_sys_enter *ctx)
{
	struct unmap_call c = {
		.addr = ctx->args[0],
		.len = ctx->args[1],
		.new_len = ctx->args[2],
		.flags = ctx->args[3],
		.mremap = 1,
	};
	__u64 id = bpf_get_current_pid_tgid();

	bpf_map_update_elem(&unmap_calls, &id, &c, BPF_ANY);
	return 0;
}

/* What a successful call changed: the range [r->start, r->end) went,
 * and, for mremap, the mapping that held r->start now spans [r->to,
 * r->to_end) at the address it returned, moved or resized in place
 * alike. False if nothing changed that a Table holds: a failed call, an
 * empty range, MREMAP_DONTUNMAP (the old range stays, the new one is
 * anonymous) or old_len 0 (a second mapping of shared memory). */
static __always_inline bool unmapped(const struct unmap_call *c, long ret, struct synth_unmap *r)
{
	__u64 len = page_align(c->len);

	if ((unsigned long)ret >= (unsigned long)-MAX_ERRNO || !len)
		return false;
	r->start = c->addr;
	r->end = c->addr + len;
	if (!c->mremap)
		return true;
	if (c->flags & MREMAP_DONTUNMAP)
		return false;
	r->to = ret;
	r->to_end = ret + page_align(c->new_len);
	return true;
}

/* The exit of either call: the arguments the enter noted say which. */
static __always_inline void report_unmap(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct unmap_call *c = bpf_map_lookup_elem(&unmap_calls, &id);
	struct synth_unmap r = {};
	struct pidns ns;

	bool ok;

	if (!c)
		return;
	ok = unmapped(c, ctx->ret, &r);
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
	report_unmap(ctx);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mremap")
int exit_mremap(struct trace_event_raw_sys_exit *ctx)
{
	report_unmap(ctx);
	return 0;
}

#endif /* SYNTH_UNMAP_BPF_H */
