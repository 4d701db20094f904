/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * A lockless walk of a process's VMAs: the maple tree of mm->mm_mt
 * (lib/maple_tree.c, include/linux/maple_tree.h), read under the RCU read
 * lock that every non-sleepable iterator program runs under.
 *
 * mm trees are RCU-safe (MT_FLAGS_USE_RCU): nodes a writer replaces are
 * freed after a grace period, and VMAs come from a SLAB_TYPESAFE_BY_RCU
 * cache. A reader may still see a tree that a writer is changing, so
 * every walk is validated before its records count:
 *   - mm->mm_lock_seq, the mmap write lock's sequence count, is even
 *     (not write-locked) and the same before and after the walk;
 *   - every VMA's vm_mm is the mm, and addresses ascend;
 *   - a walk that reached the end counted mm->map_count VMAs.
 * A walk that fails is reported as such (SYNTH_WALK_INVALID) and
 * userspace reads that process again with the task_vma iterator.
 *
 * The first check is a proof only where mm_lock_seq is a seqcount_t
 * (include/linux/mmap_lock.h: mm_lock_seqcount_begin() makes it odd for
 * as long as mmap_write_lock() is held): 6.14 and later, and stable
 * kernels that took that change (Debian 12's 6.12.107 has it). On 6.4 to
 * 6.13 without it mm_lock_seq is an int that changes only when the lock
 * is released, and before 6.4 there is none: there, walk_provable() is
 * false, the walk is never run, and every process is read with the
 * iterator.
 *
 * Nodes are decoded as lib/maple_tree.c lays them out: an encoded node
 * pointer carries its type in bits 3-6 and the node is 256-byte aligned
 * (mt_mk_node(), mte_to_node()); the root pointer is tagged with
 * MAPLE_ROOT_NODE;
 * maple_range_64/maple_leaf_64 have 15 pivots and 16 slots, the last
 * slot holding the metadata (end) when the node is not full;
 * maple_arange_64 has 9 pivots, 10 slots, 10 gaps and the metadata.
 * BTF does not say all of this, so maple_layout_ok() checks what it can
 * (sizes and offsets, by CO-RE) and the walk is used only when it holds.
 */
#ifndef SYNTH_MAPLE_BPF_H
#define SYNTH_MAPLE_BPF_H

#include "record.bpf.h"

/* kfuncs of 6.2 (bpf_rdonly_cast) and 6.7 (the open-coded task_vma
 * iterator): weak, so that a kernel without them still loads the
 * programs that do not reach them (walk_provable()). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;
extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it,
				 struct task_struct *task, __u64 addr) __ksym __weak;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym __weak;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym __weak;

/* libbpf 1.2's; Debian 12's libbpf-dev is 1.1. */
#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!(sym))
#endif

/* Levels the walk keeps. The height is set by the entries, not by the
 * address space: the leaves hold the VMAs and the gaps between them, at
 * most 2 * map_count + 1 entries, and lib/maple_tree.c rebalances a
 * non-root node below mt_min_slots: a leaf holds at least 7 entries, an
 * internal (maple_arange_64) node at least 5 children, the root at least
 * 2. A tree of height 8 thus has at least 2 * 5^6 * 7 = 218,750 entries,
 * more than the 131,061 of the default vm.max_map_count (65530); one of
 * height 9 more than a million. A deeper tree (max_map_count raised past
 * ~550k, and sparse) fails mw_load(): the process is read with the
 * iterator, never walked in part. */
#define MW_DEPTH 8
#define MW_NODE_WORDS 32     /* 256-byte nodes */
#define MW_NODE_MASK 0xffULL /* MAPLE_NODE_MASK */
#define MW_TYPE_SHIFT 3      /* MAPLE_NODE_TYPE_SHIFT */
#define MW_TYPE_MASK 0xf     /* MAPLE_NODE_TYPE_MASK */
#define MW_LEAF_64 1         /* enum maple_type */
#define MW_RANGE_64 2
#define MW_ARANGE_64 3
#define MW_MAX_STEPS (1 << 23) /* bpf_loop's limit */

/* One level of the walk: a copy of the node, read once. */
struct mw_frame {
	__u64 node[MW_NODE_WORDS];
	__u64 max; /* the highest address the node covers */
	__u32 slot; /* next slot to visit */
	__u32 end;  /* last slot in use */
	__u32 type;
	__u32 pad;
};

struct mw_state {
	struct mw_frame f[MW_DEPTH];
	/* The walk of one process (see struct walk in walk.bpf.h). */
	__u64 mm;
	__u64 now;      /* the time of its records */
	__u64 prev_end; /* the end of the last VMA: addresses ascend */
	__u64 count;    /* VMAs walked */
	__u64 resume;   /* where the next chunk starts */
	__u32 depth;    /* frame of the node being walked */
	__u32 tgid, tid;
	__u32 bytes;    /* put into the batch for this task */
	__u32 status;   /* SYNTH_WALK_*, 0 while walking */
	__u32 seq;      /* mm_lock_seq when the walk began */
	__u32 map_count; /* mm->map_count, read while the walk held */
	__u32 seeking;  /* descending to the first VMA that ends above prev_end */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mw_state);
} mw_scratch SEC(".maps");

/* Whether this kernel's maple tree is laid out as the walk decodes it.
 * Every term is a constant after CO-RE relocation. */
static __always_inline bool maple_layout_ok(void)
{
	return bpf_core_type_exists(struct maple_range_64) &&
	       bpf_core_type_exists(struct maple_arange_64) &&
	       bpf_core_field_exists(struct mm_struct, mm_mt) &&
	       bpf_core_type_size(struct maple_node) == 8 * MW_NODE_WORDS &&
	       bpf_core_field_offset(struct maple_range_64, pivot) == 8 &&
	       bpf_core_field_offset(struct maple_range_64, slot) == 128 &&
	       bpf_core_field_offset(struct maple_arange_64, slot) == 80 &&
	       bpf_core_field_offset(struct maple_arange_64, meta) == 240 &&
	       bpf_core_enum_value_exists(enum maple_type, maple_arange_64) &&
	       bpf_core_enum_value(enum maple_type, maple_leaf_64) == MW_LEAF_64 &&
	       bpf_core_enum_value(enum maple_type, maple_range_64) == MW_RANGE_64 &&
	       bpf_core_enum_value(enum maple_type, maple_arange_64) == MW_ARANGE_64;
}

/* Whether this kernel can run the maple walk and prove it: its tree laid
 * out as the walk decodes it, mm_lock_seq a seqcount, and the kfuncs the
 * walk calls. A constant after CO-RE relocation: where it is false, the
 * verifier prunes the walk, and no relocation or kfunc that this kernel
 * lacks is reached. */
static __always_inline bool walk_provable(void)
{
	return maple_layout_ok() &&
	       bpf_core_field_exists(struct mm_struct, mm_lock_seq.sequence) &&
	       bpf_ksym_exists(bpf_rdonly_cast) &&
	       bpf_ksym_exists(bpf_iter_task_vma_new) &&
	       bpf_ksym_exists(bpf_iter_task_vma_next) &&
	       bpf_ksym_exists(bpf_iter_task_vma_destroy);
}

/* A frame index the verifier can see is in range: the mask is done in
 * asm, where clang cannot move it away from the access. */
static __always_inline struct mw_frame *mw_frame(struct mw_state *w, __u32 d)
{
	asm volatile("%0 &= %1" : "+r"(d) : "i"(MW_DEPTH - 1));
	return &w->f[d];
}

/* The slot and pivot words of a node copy. */
static __always_inline __u64 mw_slot(struct mw_frame *f, __u32 i)
{
	__u32 base = f->type == MW_ARANGE_64 ? 10 : 16;

	return f->node[(base + i) & (MW_NODE_WORDS - 1)];
}

static __always_inline __u64 mw_pivot(struct mw_frame *f, __u32 i)
{
	return f->node[(1 + i) & 15];
}

/* ma_data_end() of lib/maple_tree.c: the last slot in use. */
static __always_inline __u32 mw_data_end(struct mw_frame *f)
{
	__u64 last;

	if (f->type == MW_ARANGE_64)
		return (__u8)f->node[30]; /* meta.end */
	last = f->node[15];               /* pivot[14] */
	if (!last)
		return (__u8)f->node[31]; /* meta.end, in the last slot */
	if (last == f->max)
		return 14;
	return 15;
}

/* 1 if a < b, else 0, with no branch: the borrow out of a - b. The
 * empty asm keeps clang from turning it back into a compare and a jump,
 * which the verifier would follow both ways. */
static __always_inline __u64 mw_below(__u64 a, __u64 b)
{
	__u64 d = a - b;

	asm volatile("" : "+r"(d));
	return ((~a & b) | (~(a ^ b) & d)) >> 63;
}

/* The first slot of f whose range reaches addr. Pivots in use ascend,
 * so that is the number of them below addr: a sum, so that the verifier
 * checks one path through it, not one per slot it could stop at (they
 * were most of what it checked). */
static __always_inline __u32 mw_find(struct mw_frame *f, __u64 addr)
{
	__u64 s = 0, end = f->end;

#define MW_BELOW(i) (s += mw_below(i, end) & mw_below(mw_pivot(f, i), addr))
	MW_BELOW(0), MW_BELOW(1), MW_BELOW(2), MW_BELOW(3), MW_BELOW(4);
	MW_BELOW(5), MW_BELOW(6), MW_BELOW(7), MW_BELOW(8), MW_BELOW(9);
	MW_BELOW(10), MW_BELOW(11), MW_BELOW(12), MW_BELOW(13), MW_BELOW(14);
#undef MW_BELOW
	return s;
}

/* Reads the node enode points to into frame d, to be walked from its
 * first slot, or, while the walk seeks, from the slot on the path to
 * prev_end. Returns false when the entry is not a node this walk can
 * decode. */
static __always_inline bool mw_load(struct mw_state *w, __u32 d, __u64 enode, __u64 max)
{
	struct mw_frame *f;
	__u32 type = (enode >> MW_TYPE_SHIFT) & MW_TYPE_MASK;

	/* A child's encoding is node | type << 3 | MAPLE_ENODE_NULL; the
	 * root's adds MAPLE_ROOT_NODE (2), checked by the caller. */
	if (d >= MW_DEPTH || enode < 4096)
		return false;
	if (type != MW_LEAF_64 && type != MW_RANGE_64 && type != MW_ARANGE_64)
		return false;
	f = mw_frame(w, d);
	if (bpf_probe_read_kernel(f->node, sizeof(f->node), (void *)(enode & ~MW_NODE_MASK)))
		return false;
	f->type = type;
	f->max = max;
	f->slot = 0;
	f->end = mw_data_end(f);
	if (f->end > (type == MW_ARANGE_64 ? 9 : 15))
		return false;
	if (w->seeking) {
		/* Down the path to prev_end: this node's first slot whose
		 * range reaches it, and below it, the same, to the leaf. */
		f->slot = mw_find(f, w->prev_end);
		if (type == MW_LEAF_64)
			w->seeking = 0;
	}
	return true;
}

#endif /* SYNTH_MAPLE_BPF_H */
