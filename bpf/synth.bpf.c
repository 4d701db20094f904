//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Synthesize PERF_RECORD_MMAP2, COMM, FORK and NAMESPACES records for the tasks that
 * exist when a dump runs, from BPF iterators, into perf ring buffers.
 *
 * The default dump is one iterator, dump_tasks (iter/task; the walk is in
 * walk.bpf.h):
 * FORK, NAMESPACES (on request) and COMM for every task (but one released
 * while the dump reads it, see pidns_task), and, for each
 * process, the MMAP2 records of a validated walk of its maple tree.
 * With --walk iter, and for a process whose walk did not hold, two
 * iterators run instead, one after the other:
 *   dump_task (iter/task):     FORK, NAMESPACES and COMM for every task.
 *   dump_vma  (iter/task_vma): MMAP2 for every VMA of every process (once per
 *                              thread group, not per thread).
 * Each emitted record also writes ceil(size / SYNTH_PACE_UNIT) bytes into the
 * iterator's seq_file: userspace reads the iterator fd with a bounded buffer
 * and drains the rings between reads, so the rings cannot overflow.
 *
 * The programs at the end hang on the syscall tracepoints of munmap,
 * mremap, mprotect and mmap, and report, between dumps, the ranges a
 * process gave up, into rings of their own (unmap.bpf.h). The Go side is
 * internal/method/bpfmethod.
 */
#include "record.bpf.h"
#include "walk.bpf.h"
#include "unmap.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Puts synth.h's contract into the BTF (see struct synth_contract). */
const struct synth_contract *synth_contract __attribute__((unused));

/* Records are too large for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct synth_mmap2);
} scratch SEC(".maps");

/* Last task whose VMAs dump_vma started on (its global tid), and its
 * process and thread ids in the reader's pid namespace. */
__u32 last_tid;
__u32 last_ns_pid, last_ns_tid;

/* The bounded wait for a process's mmap lock. The kernel's task_vma
 * iterator takes each process's mmap_lock with a wait only a fatal
 * signal ends; userspace gives up on a read stuck in it, and then sets
 * vma_session_min past the session of that iterator instance, read with
 * session_probe: when the lock comes free, the instance it gave up on
 * stops at its next VMA and emits nothing. Every instance opened later
 * has a larger session_id (kernel/bpf/bpf_iter.c numbers them in open
 * order), so the fence stops none of them. */
volatile __u64 vma_session_min;
__u64 session_last;

SEC("iter/task")
int dump_task(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	__u64 now = bpf_ktime_get_ns();
	struct synth_fork f = {};
	struct pidns pns;
	__u32 pid, tid;

	if (!task)
		return 0;
	reader_pidns(&pns);
	pidns_task(task, &pns, &pid, &tid);
	if (!pid || !tid)
		return 0; /* released meanwhile (see pidns_task) */
	if (task_exiting(task))
		return 0;
	f.h.time = now;
	fill_fork(&f, task, &pns, pid, tid);
	emit(ctx, seq, &f.h, sizeof(f));
	if (synth_flags & SYNTH_CFG_NAMESPACES) {
		struct synth_namespaces ns;

		ns.h.time = now;
		fill_namespaces(&ns, task, pid, tid);
		emit(ctx, seq, &ns.h, sizeof(ns));
	}
	emit_comm(ctx, seq, task, pid, tid, now);
	return 0;
}

SEC("iter/task_vma")
int dump_vma(struct bpf_iter__task_vma *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct vm_area_struct *vma = ctx->vma;
	struct synth_pending_rec pr;
	struct synth_mmap2 *r;
	struct file *file;
	__u32 zero = 0, tid;
	__u64 vmf, now;
	bool pended = false;
	long n;

	if (ctx->meta->session_id < vma_session_min)
		return 1; /* given up on: stop, the read returns EAGAIN */
	if (!task || !vma)
		return 0;
	if (!reports_vmas(task))
		return 0;
	now = bpf_ktime_get_ns();
	/* After now: see task_exiting. Only the task's own PF_EXITING here:
	 * the iterator lets go of the mmap lock between two reads, so a
	 * process can start exiting between them, and userspace drops the
	 * part it read by what /proc shows of the same task (its flags, or
	 * a zombie leader: procfs.Exiting), which does not show
	 * SIGNAL_GROUP_EXIT. Stopping at that bit would cut a process short
	 * where userspace cannot see it. */
	if (task->flags & PF_EXITING)
		return 0;
	tid = task->pid;
	if (tid != last_tid) {
		struct pidns pns;

		reader_pidns(&pns);
		pidns_task(task, &pns, &last_ns_pid, &last_ns_tid);
		/* Released meanwhile (see pidns_task): no record, and the
		 * same question at each of its VMAs. */
		if (!last_ns_pid || !last_ns_tid)
			return 0;
		last_tid = tid;
		/* The process may be newer than the task pass: name it. */
		emit_comm(ctx, seq, task, last_ns_pid, last_ns_tid, now);
	}
	vmf = vma->vm_flags;
	if (!(vmf & VM_EXEC) && !(synth_flags & SYNTH_CFG_DATA))
		return 0;
	r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return 0;

	r->h.time = now;
	fill_vma(r, last_ns_pid, last_ns_tid, vma->vm_start, vma->vm_end, vmf);

	file = vma->vm_file;
	if (file) {
		pended = fill_file(r, file, vma, &pr.key);
		r->pgoff = (__u64)vma->vm_pgoff << page_shift;
		n = bpf_d_path((struct path *)&file->f_path, r->filename,
			       sizeof(r->filename));
		if (n <= 0)
			n = copy_str(r->filename, "//toolong");
	} else {
		r->u.f.maj = r->u.f.min = 0;
		r->u.f.ino = r->u.f.ino_generation = 0;
		r->pgoff = 0;
		n = anon_name(vma, r->filename);
	}
	emit(ctx, seq, &r->h, finish_mmap2(r, n));
	if (pended) {
		pr.h.time = now;
		fill_pending_rec(&pr, &pr.key, last_ns_pid, vma->vm_start, vma->vm_end);
		emit(ctx, seq, &pr.h, sizeof(pr));
	}
	return 0;
}

SEC("iter/task")
int dump_tasks(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task, *t;
	struct walk c = { .ctx = ctx, .seq = ctx->meta->seq };
	struct mm_struct *mm;

	c.b = batch_get();
	if (!c.b)
		return 0;
	if (!task) { /* the end of the iteration */
		batch_flush(ctx, c.seq, c.b);
		return 0;
	}
	/* The task's fields are read through an untrusted copy of it: at
	 * each load of a pointer field of a trusted task, in each state it
	 * checks the load in, the verifier looks for "task_struct__safe_*"
	 * types by name in vmlinux BTF (btf_nested_type_is_trusted), a
	 * linear search that was a quarter of this program's load time. */
	t = bpf_rdonly_cast(task, bpf_core_type_id_kernel(struct task_struct));
	if (!walk_init(&c, task, t))
		return 0;
	/* After walk_init took the read's time: see task_exiting. A
	 * process that starts exiting between two chunks of its walk
	 * leaves it unended: read again by the iterator, which leaves it
	 * out too. */
	if (task_exiting(t))
		return 0;
	if (!resume_mode)
		walk_task_records(&c, t);
	mm = t->mm;
	/* A kernel thread has an mm only inside kthread_use_mm(): another
	 * process's, which get_task_mm() does not report for it either. */
	if (mm && !(t->flags & PF_KTHREAD) && reports_vmas(t))
		walk_process(&c, mm);
	return 0;
}

/* Reads the session_id of a fresh iterator instance: one larger than
 * that of every instance opened before it. */
SEC("iter/task")
int session_probe(struct bpf_iter__task *ctx)
{
	session_last = ctx->meta->session_id;
	return 0;
}

/* What userspace asks of this kernel once per load, by a
 * BPF_PROG_TEST_RUN of probe:
 *  - the kernel text bounds for the [kernel.kallsyms]_text map: much
 *    faster than reading all of /proc/kallsyms for two symbols;
 *  - whether the maple walk can run and prove itself here (walk_ok):
 *    where it cannot, userspace does not load dump_tasks and reads
 *    every process with the task_vma iterator. */
__u64 text_start;
__u64 text_end;
__u32 walk_ok;

SEC("syscall")
int probe(void *ctx)
{
	static const char text[] = "_text", etext[] = "_etext";

	bpf_kallsyms_lookup_name(text, sizeof(text), 0, &text_start);
	bpf_kallsyms_lookup_name(etext, sizeof(etext), 0, &text_end);
	walk_ok = walk_provable();
	return 0;
}

/*
 * Unmaps between dumps (unmap.bpf.h): each enter notes its call's
 * arguments, each exit reports the range its call changed. Each
 * tracepoint needs a program of its own.
 */

/* Run by userspace (BPF_PROG_TEST_RUN): current is the reader. */
SEC("syscall")
int note_reader(void *ctx)
{
	struct pidns r;

	reader_pidns(&r);
	reader_level = r.level;
	reader_ns = (__u64)r.ns;
	reader_known = 1;
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_munmap")
int enter_munmap(struct syscall_enter_ctx *ctx)
{
	note_call(ctx, 0, 0, CALL_MUNMAP);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mremap")
int enter_mremap(struct syscall_enter_ctx *ctx)
{
	note_call(ctx, ctx->args[2], ctx->args[3], CALL_MREMAP);
	return 0;
}

/* Only a call that leaves a range without PROT_EXEC is noted: one that
 * makes it executable is reported by the kernel (an MMAP2). */
SEC("tracepoint/syscalls/sys_enter_mprotect")
int enter_mprotect(struct syscall_enter_ctx *ctx)
{
	if (!(ctx->args[2] & PROT_EXEC))
		note_call(ctx, 0, 0, CALL_MPROTECT);
	else
		drop_call();
	return 0;
}

/* Only a MAP_FIXED mapping can land on one that exists. */
SEC("tracepoint/syscalls/sys_enter_mmap")
int enter_mmap(struct syscall_enter_ctx *ctx)
{
	if ((ctx->args[3] & MAP_FIXED) && !(ctx->args[2] & PROT_EXEC))
		note_call(ctx, 0, 0, CALL_MMAP);
	else
		drop_call();
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_munmap")
int exit_munmap(struct syscall_exit_ctx *ctx)
{
	report(ctx);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mremap")
int exit_mremap(struct syscall_exit_ctx *ctx)
{
	report(ctx);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mprotect")
int exit_mprotect(struct syscall_exit_ctx *ctx)
{
	report(ctx);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mmap")
int exit_mmap(struct syscall_exit_ctx *ctx)
{
	report(ctx);
	return 0;
}
