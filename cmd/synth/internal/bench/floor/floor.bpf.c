//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The benchmark floor of each walk (synth bench's rows floor-maple and
 * floor-iter): the walks of bpf/synth.bpf.c with nothing emitted, the
 * least a dump with that walk can cost. The maple walk is the dump's
 * own walk.bpf.h, compiled with SYNTH_WALK_ONLY. An object of its own,
 * out of package bpf, which every user of the library embeds: the object
 * a dump loads carries no benchmark program. The Go side is floor.go.
 */
#define SYNTH_WALK_ONLY
#include "../../../../../bpf/record.bpf.h"
#include "../../../../../bpf/walk.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Read by userspace: the VMAs walked. */
__u64 walked;

/* The floor of the task_vma iterator (dump_vma): counts the VMAs. */
SEC("iter/task_vma")
int walk_vma(struct bpf_iter__task_vma *ctx)
{
	if (ctx->vma)
		__sync_fetch_and_add(&walked, 1);
	return 0;
}

/* The floor of the maple walk (dump_tasks): walk and validate every
 * process, emit nothing. Counts the VMAs of the walks that hold. */
SEC("iter/task")
int walk_maple(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task, *t;
	struct walk c = { .ctx = ctx, .seq = ctx->meta->seq };
	struct mm_struct *mm;

	if (!task)
		return 0;
	t = bpf_rdonly_cast(task, bpf_core_type_id_kernel(struct task_struct)); /* as dump_tasks */
	if (t->pid != t->tgid)
		return 0;
	mm = t->mm;
	if (!mm || (t->flags & PF_KTHREAD) || !walk_init(&c, task, t))
		return 0;
	walk_process(&c, mm);
	if (c.w->status == SYNTH_WALK_DONE)
		__sync_fetch_and_add(&walked, c.w->count);
	return 0;
}
