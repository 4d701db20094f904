/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The walk of dump_tasks (iter/task, synth.bpf.c), the default dump, in
 * one pass over the tasks. For each task it emits FORK (threads) and
 * COMM; for the task that reports its process's VMAs it walks the maple
 * tree (maple.bpf.h) and emits an MMAP2 record per VMA, then a struct
 * synth_walk that says whether the walk holds.
 *
 * Output goes through one batch buffer, flushed into the CPU's ring with
 * one bpf_perf_event_output() of about SYNTH_BATCH bytes; each flush
 * writes its pacing bytes into the seq_file. The buffer is a plain array,
 * not per CPU: one dump reads one iterator at a time, and the reading
 * thread may move between CPUs from one task to the next. The last call
 * of an iteration (task NULL) flushes what is left.
 *
 * One task may not put more than chunk_limit bytes into the rings: a
 * process with more records stops at a VMA (SYNTH_WALK_MORE), and
 * userspace runs the iterator again over that process alone, with
 * resume_mode set, after draining the rings.
 *
 * Per file, the work is done once per run of VMAs of the same struct
 * file: the key, the build-ID lookup, and the path. The path needs a
 * VMA the verifier trusts, which the walk's are not: it is read from the
 * open-coded task_vma iterator positioned at the VMA, which also checks
 * that the VMA is still there with the same file.
 *
 * Compiled with SYNTH_WALK_ONLY defined, the walk walks and validates
 * every VMA and emits nothing (walk_emit_vma, walk_note_resume and
 * walk_report do nothing): synth bench's floor, the least a dump with
 * this walk can cost (cmd/synth/internal/bench/floor). The floor
 * compiles this very walk, not a copy of it, or its ratio to the dump
 * would mean nothing; the dump's object has none of it.
 */
#ifndef SYNTH_WALK_BPF_H
#define SYNTH_WALK_BPF_H

#include "record.bpf.h"

#include "maple.bpf.h"

struct batch {
	__u64 gen;  /* synth_gen the content belongs to */
	__u64 seq;  /* emission order of the batch */
	__u32 len;  /* bytes in buf */
	__u32 nrec; /* records in buf */
	/* A record starts below SYNTH_BATCH and is at most a whole
	 * struct synth_mmap2 long: less than twice SYNTH_BATCH. */
	__u8 buf[2 * SYNTH_BATCH];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct batch);
} batches SEC(".maps");

/* The file of the last VMA that emitted, and what was found for it. */
struct last_file {
	__u64 file; /* struct file *, as a number; 0: none */
	__u64 prev; /* the file of the record emitted last in this walk; 0: none */
	struct synth_file_key key;
	struct synth_build_id id;
	__u32 len;    /* of path, with its NUL */
	__u32 pended; /* walk_file noted the file in pending just now */
	char path[SYNTH_PATH_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct last_file);
} last_files SEC(".maps");

/* tgid -> where its walk goes on, between chunks. The next chunk must
 * find the same mm at the same mm_lock_seq: then no writer ran between
 * the chunks, and they are one snapshot. */
struct resume_at {
	__u64 gen;
	__u64 addr;
	__u64 count; /* VMAs walked by the chunks before */
	__u64 mm;
	__u32 seq;
	__u32 pad;
	/* The process's start (its leader's start_time): a process that
	 * took the pid of one that exited between chunks is not it, even
	 * where its mm took the freed one's address. */
	__u64 start;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct resume_at);
} resumes SEC(".maps");

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h */

/* Set by userspace. */
volatile __u32 chunk_limit = 1 << 16; /* ring bytes one task may emit */
volatile __u32 resume_mode;           /* walk VMAs only: no COMM, no FORK */

/* For bpf2go: emit these into BTF, for the Go side's layouts. */
const struct synth_walk *unused_synth_walk __attribute__((unused));
const struct synth_mmap2_next *unused_synth_mmap2_next __attribute__((unused));
const struct synth_pending_rec *unused_synth_pending_rec __attribute__((unused));

static __always_inline struct batch *batch_get(void)
{
	__u32 zero = 0;
	struct batch *b = bpf_map_lookup_elem(&batches, &zero);

	if (b && b->gen != synth_gen) {
		/* Left over from a dump that was stopped. */
		b->gen = synth_gen;
		b->len = 0;
		b->nrec = 0;
	}
	return b;
}

/* Where the next record goes; b->len < SYNTH_BATCH always holds here. */
static __always_inline void *batch_at(struct batch *b)
{
	return &b->buf[b->len & (SYNTH_BATCH - 1)];
}

static __always_inline void batch_flush(void *ctx, struct seq_file *seq, struct batch *b)
{
	__u32 n = b->len;

	if (!n)
		return;
	n &= sizeof(b->buf) - 1; /* a no-op the verifier can see */
	if (bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, b->buf, n) < 0)
		__sync_fetch_and_add(&synth_lost, b->nrec);
	else
		pace_out(seq, n);
	b->len = 0;
	b->nrec = 0;
}

/* Closes the record of size bytes at batch_at(b), synth_hdr included. */
static __always_inline void batch_commit(void *ctx, struct seq_file *seq, struct batch *b,
					 struct synth_hdr *h, __u64 now, __u32 size)
{
	if (!b->nrec)
		b->seq = __sync_fetch_and_add(&synth_seq, 1);
	h->gen = synth_gen;
	h->seq = b->seq;
	h->time = now;
	b->len += size;
	b->nrec++;
	if (b->len >= SYNTH_BATCH)
		batch_flush(ctx, seq, b);
}

/* What the walk's steps share: pointers on the stack; the state that
 * changes from step to step lives in the map value (struct mw_state),
 * where the verifier does not track it value by value, so that the
 * bpf_loop callback's states converge. */
struct walk {
	void *ctx;
	struct seq_file *seq;
	struct task_struct *task; /* trusted: for the kfuncs (walk_path) */
	struct task_struct *t;    /* the same task, untrusted: to read (see dump_tasks) */
	struct mw_state *w;
	struct batch *b;
	struct last_file *lf;
	struct pidns ns; /* the reader's pid namespace */
};

#ifndef SYNTH_WALK_ONLY

/* libbpf's bpf_helpers.h defines it from 1.4 on; bookworm's 1.1 does not. */
#ifndef __arg_trusted
#define __arg_trusted __attribute__((btf_decl_tag("arg:trusted")))
#endif

/* Reads the path of the file of the VMA at start from a VMA the
 * verifier trusts, into lf->path, and checks that it is still the walk's
 * file. A global function: verified once, not at every place the walk
 * may reach it. */
__noinline long walk_path(struct task_struct *task __arg_trusted, __u64 start, __u64 file,
			  struct last_file *lf)
{
	struct bpf_iter_task_vma it;
	struct vm_area_struct *v, *u;
	struct file *f;
	long n = -1;

	if (!lf || !walk_provable())
		return -1;
	/* A loop, though it stops at the first VMA at or after start:
	 * 6.18's verifier wants every iterator's next() in one. */
	bpf_iter_task_vma_new(&it, task, start);
	while ((v = bpf_iter_task_vma_next(&it))) {
		/* Compared through an untrusted copy, as dump_tasks reads its
		 * task: only bpf_d_path needs the trusted VMA's file. */
		u = bpf_rdonly_cast(v, bpf_core_type_id_kernel(struct vm_area_struct));
		if (u->vm_start < start)
			continue; /* covers start: the walk's VMA is gone */
		/* The file is read from the trusted VMA and checked for NULL
		 * itself: from 7.x the verifier types a trusted VMA's vm_file
		 * as trusted or NULL, and the copy's check proves nothing
		 * about it ("pointer arithmetic before NULL check"). */
		f = v->vm_file;
		if (f && u->vm_start == start && (__u64)f == file)
			n = bpf_d_path((struct path *)&f->f_path, lf->path, sizeof(lf->path));
		break;
	}
	bpf_iter_task_vma_destroy(&it);
	return n;
}

/* Looks up what a new file needs once: key, build ID, path. */
static __always_inline bool walk_file(struct walk *c, struct vm_area_struct *vma, __u64 file)
{
	struct last_file *lf = c->lf;
	struct synth_build_id *id;
	long n;

	file_key((struct file *)file, &lf->key);
	lf->id.size = 0;
	lf->pended = 0;
	if (synth_flags & SYNTH_CFG_BUILDID) {
		id = bpf_map_lookup_elem(&build_ids, &lf->key);
		if (id)
			lf->id = *id;
		else
			/* Read in userspace, from the file, from now on. */
			lf->pended = pend(&lf->key, c->w->tgid, vma->vm_start, vma->vm_end);
	}
	n = walk_path(c->task, vma->vm_start, file, lf);
	if (n <= 0 || n > SYNTH_PATH_MAX) {
		lf->file = 0;
		return false;
	}
	lf->len = n;
	lf->file = file;
	return true;
}

/* Emits the MMAP2 record of one walked VMA. Returns false when the
 * process must be read again. */
static __always_inline bool walk_emit(struct walk *c, struct vm_area_struct *vma, __u64 vmf)
{
	struct synth_mmap2 *r = batch_at(c->b);
	struct last_file *lf = c->lf;
	struct file *fp = vma->vm_file;
	__u64 file = 0;
	__u32 n;

	if (fp && (__u64)fp == lf->prev) {
		/* The file of the record before: a short record will do. */
		struct synth_mmap2_next *x = (void *)r;

		fill_vma(r, c->w->tgid, c->w->tid, vma->vm_start, vma->vm_end, vmf);
		if (lf->id.size)
			x->header.misc |= SYNTH_MISC_MMAP_BUILD_ID;
		x->header.type = SYNTH_RECORD_MMAP2_NEXT;
		x->header.size = sizeof(*x) - sizeof(x->h);
		x->pgoff = vma->vm_pgoff << page_shift;
		x->prot = r->prot;
		x->flags = r->flags;
		c->w->bytes += sizeof(*x);
		batch_commit(c->ctx, c->seq, c->b, &x->h, c->w->now, sizeof(*x));
		return true;
	}
	fill_vma(r, c->w->tgid, c->w->tid, vma->vm_start, vma->vm_end, vmf);
	if (fp) {
		if ((__u64)fp != lf->file) {
			/* As a number, for walk_path: the walk's pointers are
			 * not the verifier's to trust. */
			bpf_probe_read_kernel(&file, sizeof(file), &vma->vm_file);
			if (!walk_file(c, vma, file))
				return false;
		}
		lf->prev = (__u64)fp;
		r->pgoff = vma->vm_pgoff << page_shift;
		fill_ident(r, &lf->key, &lf->id);
		/* A bound, not a mask: a path of 4095 bytes and its NUL
		 * fill the buffer, and len & 4095 made that 0. */
		n = lf->len;
		if (n < 1 || n > SYNTH_PATH_MAX)
			return false;
		bpf_probe_read_kernel(r->filename, n, lf->path);
	} else {
		lf->prev = 0;
		r->u.f.maj = r->u.f.min = 0;
		r->u.f.ino = r->u.f.ino_generation = 0;
		r->pgoff = 0;
		n = anon_name(vma, r->filename);
	}
	n = finish_mmap2(r, n);
	c->w->bytes += n;
	batch_commit(c->ctx, c->seq, c->b, &r->h, c->w->now, n);
	if (lf->pended) {
		/* After the record: userspace starts the read now. */
		struct synth_pending_rec *pr = batch_at(c->b);

		lf->pended = 0;
		fill_pending_rec(pr, &lf->key, c->w->tgid, vma->vm_start, vma->vm_end);
		c->w->bytes += sizeof(*pr);
		batch_commit(c->ctx, c->seq, c->b, &pr->h, c->w->now, sizeof(*pr));
	}
	return true;
}

/* Emits the records of a walked VMA, if the dump wants them. Returns 1
 * to end the walk: at chunk_limit (MORE, to resume at start), or when
 * the process must be read again (INVALID). */
static __always_inline long walk_emit_vma(struct walk *c, struct vm_area_struct *vma, __u64 start)
{
	__u64 vmf = vma->vm_flags;

	if ((vmf & VM_EXEC) || (synth_flags & SYNTH_CFG_DATA)) {
		if (c->w->bytes + sizeof(struct synth_mmap2) + sizeof(struct synth_pending_rec) +
		    sizeof(struct synth_walk) > chunk_limit) {
			c->w->status = SYNTH_WALK_MORE;
			c->w->resume = start;
			return 1;
		}
		if (!walk_emit(c, vma, vmf)) {
			c->w->status = SYNTH_WALK_INVALID;
			return 1;
		}
	}
	return 0;
}

#else /* SYNTH_WALK_ONLY */

/* Nothing: the VMA is only counted. */
static __always_inline long walk_emit_vma(struct walk *c, struct vm_area_struct *vma, __u64 start)
{
	return 0;
}

#endif /* SYNTH_WALK_ONLY */

/* Visits the VMA in a leaf slot. Returns 1 to end the walk. */
static __always_inline long walk_one(struct walk *c, __u64 entry)
{
	struct vm_area_struct *vma;
	__u64 start, end;

	if (entry & 7) { /* a reserved entry, not a VMA */
		c->w->status = SYNTH_WALK_INVALID;
		return 1;
	}
	vma = bpf_rdonly_cast((void *)entry, bpf_core_type_id_kernel(struct vm_area_struct));
	start = vma->vm_start;
	end = vma->vm_end;
	if ((__u64)vma->vm_mm != c->w->mm || start < c->w->prev_end || end <= start) {
		c->w->status = SYNTH_WALK_INVALID;
		return 1;
	}
	if (walk_emit_vma(c, vma, start))
		return 1;
	c->w->prev_end = end;
	c->w->count++;
	return 0;
}

static __always_inline __u32 lock_seq(struct mm_struct *mm)
{
	return *(volatile __u32 *)&mm->mm_lock_seq.sequence;
}

/* Steps between two looks at mm_lock_seq while walking: a writer that
 * changed the tree ends the walk within this many steps, not after up to
 * MW_MAX_STEPS under RCU. */
#define WALK_SEQ_EVERY 256

/* One step of the walk: a slot of the current node. */
static long walk_step(__u64 i, struct walk *c)
{
	struct mw_frame *f = mw_frame(c->w, c->w->depth);
	struct mm_struct *mm;
	__u32 s;
	__u64 entry;

	if (walk_provable() && (i & (WALK_SEQ_EVERY - 1)) == WALK_SEQ_EVERY - 1) {
		mm = bpf_rdonly_cast((void *)c->w->mm, bpf_core_type_id_kernel(struct mm_struct));
		if (lock_seq(mm) != c->w->seq) {
			c->w->status = SYNTH_WALK_INVALID;
			return 1;
		}
	}

	if (f->slot > f->end) {
		if (!c->w->depth) {
			c->w->status = SYNTH_WALK_DONE;
			return 1;
		}
		c->w->depth--;
		return 0;
	}
	s = f->slot++;
	entry = mw_slot(f, s);
	if (f->type == MW_LEAF_64)
		return entry ? walk_one(c, entry) : 0;
	if (!mw_load(c->w, c->w->depth + 1, entry, s < f->end ? mw_pivot(f, s) : f->max)) {
		c->w->status = SYNTH_WALK_INVALID;
		return 1;
	}
	c->w->depth++;
	return 0;
}

/* Walks the VMAs of mm from c->w->prev_end, and returns the walk's
 * status: SYNTH_WALK_DONE or SYNTH_WALK_MORE only when the walk holds
 * (see maple.bpf.h). */
static __always_inline __u32 walk_mm(struct walk *c, struct mm_struct *mm)
{
	__u32 seq1, seq2;
	__u64 root;

	/* A constant: where false, the rest is dead code to the verifier,
	 * mm_lock_seq's relocation included. */
	if (!walk_provable())
		return SYNTH_WALK_INVALID;
	seq1 = lock_seq(mm);
	if (seq1 & 1)
		return SYNTH_WALK_INVALID; /* write-locked */
	c->w->seq = seq1;
	c->w->status = SYNTH_WALK_INVALID;
	root = (__u64)mm->mm_mt.ma_root;
	if (!root) {
		c->w->status = SYNTH_WALK_DONE;
	} else if ((root & 3) == 2) { /* xa_is_node() */
		/* The steps descend from the root to the first VMA that ends
		 * above prev_end (0 for a first chunk), then walk on. The
		 * descent is theirs, not a loop of its own: unrolled over
		 * MW_DEPTH levels, it was most of what the verifier checked. */
		c->w->seeking = 1;
		if (mw_load(c->w, 0, root, ~0ULL)) {
			c->w->depth = 0;
			c->w->status = 0;
			bpf_loop(MW_MAX_STEPS, walk_step, c, 0);
		}
	}
	/* Inside the window the sequence proves: a writer after it
	 * changes the count, not the walk. */
	c->w->map_count = mm->map_count;
	seq2 = lock_seq(mm);
	if (seq1 != seq2 || !c->w->status)
		return SYNTH_WALK_INVALID;
	return c->w->status;
}

/* When task's process started: its leader's start_time. */
static __always_inline __u64 process_start(struct task_struct *task)
{
	struct task_struct *leader = task->group_leader;

	return leader ? leader->start_time : 0;
}

/* Whether the walk holds, from what walk_mm found: INVALID unless every
 * check passes. ra is where it resumed, NULL for a first chunk. */
static __always_inline void walk_verdict(struct walk *c, struct mm_struct *mm, struct resume_at *ra)
{
	/* One snapshot across chunks: no writer since the last one. */
	if (ra && c->w->seq != ra->seq)
		c->w->status = SYNTH_WALK_INVALID;
	/* The task's mm is not pinned: it must still be the mm walked (an
	 * mm freed meanwhile and reused would pass every check above). */
	if (*(volatile __u64 *)&c->t->mm != (__u64)mm)
		c->w->status = SYNTH_WALK_INVALID;
	if (c->w->status == SYNTH_WALK_DONE && c->w->count != c->w->map_count)
		c->w->status = SYNTH_WALK_INVALID;
}

#ifndef SYNTH_WALK_ONLY

/* Notes where the next chunk of a walk that stopped (MORE) takes up, in
 * next, or forgets the note of a walk that ended. */
static __always_inline void walk_note_resume(struct walk *c, struct mm_struct *mm,
					     struct resume_at *ra, struct resume_at *next)
{
	if (c->w->status == SYNTH_WALK_MORE) {
		next->gen = synth_gen;
		next->addr = c->w->resume;
		next->count = c->w->count;
		next->mm = (__u64)mm;
		next->seq = c->w->seq;
		next->start = process_start(c->t);
		/* A chunk whose sequel has nowhere to resume is no walk. */
		if (bpf_map_update_elem(&resumes, &c->w->tgid, next, BPF_ANY))
			c->w->status = SYNTH_WALK_INVALID;
	} else if (ra) {
		bpf_map_delete_elem(&resumes, &c->w->tgid);
	}
}

/* The closing struct synth_walk of a walk, into the batch. */
static __always_inline void walk_report(struct walk *c)
{
	struct synth_walk *m = batch_at(c->b);

	m->header.type = SYNTH_RECORD_WALK;
	m->header.misc = 0;
	m->header.size = sizeof(*m) - sizeof(m->h);
	m->pid = c->w->tgid;
	m->tid = c->w->tid;
	m->status = c->w->status;
	m->pad = 0;
	m->count = c->w->count;
	m->map_count = c->w->map_count;
	m->resume = c->w->resume;
	batch_commit(c->ctx, c->seq, c->b, &m->h, c->w->now, sizeof(*m));
}

#else /* SYNTH_WALK_ONLY */

/* A walk that emits nothing never stops at chunk_limit, and reports to
 * nobody. */
static __always_inline void walk_note_resume(struct walk *c, struct mm_struct *mm,
					     struct resume_at *ra, struct resume_at *next)
{
}

static __always_inline void walk_report(struct walk *c)
{
}

#endif /* SYNTH_WALK_ONLY */

/* Walks the VMAs of task's process, from where an earlier chunk stopped
 * in resume mode, and emits the closing struct synth_walk: every walk
 * asked for ends in one, INVALID when it cannot be proved whole. */
static __always_inline void walk_process(struct walk *c, struct mm_struct *mm)
{
	struct resume_at *ra = NULL, next = {};
	__u64 before = 0;

	c->lf->file = 0;
	c->lf->prev = 0;
	c->lf->pended = 0;
	c->w->mm = (__u64)mm;
	c->w->now = bpf_ktime_get_ns();
	if (resume_mode) {
		ra = bpf_map_lookup_elem(&resumes, &c->w->tgid);
		if (!ra || ra->gen != synth_gen || ra->mm != (__u64)mm ||
		    ra->start != process_start(c->t)) {
			/* The chunks before are not provably of this walk:
			 * userspace reads the process again. */
			c->w->status = SYNTH_WALK_INVALID;
			goto report;
		}
		c->w->prev_end = ra->addr;
		before = ra->count;
	}
	c->w->status = walk_mm(c, mm);
	c->w->count += before;
	walk_verdict(c, mm, ra);
	walk_note_resume(c, mm, ra, &next);
report:
	walk_report(c);
}

/* FORK, NAMESPACES (on request) and COMM of a task, into the batch. */
static __always_inline void walk_task_records(struct walk *c, struct task_struct *task)
{
	struct synth_namespaces *ns;
	struct synth_comm *cm;
	struct synth_fork *f;
	__u32 n;

	f = batch_at(c->b);
	fill_fork(f, task, &c->ns, c->w->tgid, c->w->tid);
	batch_commit(c->ctx, c->seq, c->b, &f->h, c->w->now, sizeof(*f));
	if (synth_flags & SYNTH_CFG_NAMESPACES) {
		ns = batch_at(c->b);
		fill_namespaces(ns, task, c->w->tgid, c->w->tid);
		batch_commit(c->ctx, c->seq, c->b, &ns->h, c->w->now, sizeof(*ns));
	}
	cm = batch_at(c->b);
	n = fill_comm(cm, task, c->w->tgid, c->w->tid);
	batch_commit(c->ctx, c->seq, c->b, &cm->h, c->w->now, sizeof(struct synth_hdr) + n);
}

/* Sets up the walk state of task (t: the same, untrusted); false when
 * the maps are missing, or when the reader's namespace numbers the task
 * no more (see pidns_task): it was released since the iterator found it,
 * and /proc has it no more. */
static __always_inline bool walk_init(struct walk *c, struct task_struct *task, struct task_struct *t)
{
	__u32 zero = 0;
	struct mw_state *w = bpf_map_lookup_elem(&mw_scratch, &zero);

	c->lf = bpf_map_lookup_elem(&last_files, &zero);
	if (!w || !c->lf)
		return false;
	c->w = w;
	c->task = task;
	c->t = t;
	w->map_count = 0;
	w->seq = 0;
	reader_pidns(&c->ns);
	pidns_task(t, &c->ns, &w->tgid, &w->tid);
	if (!w->tgid || !w->tid)
		return false;
	w->now = bpf_ktime_get_ns();
	w->bytes = 0;
	w->prev_end = 0;
	w->count = 0;
	w->resume = 0;
	w->status = 0;
	return true;
}

#endif /* SYNTH_WALK_BPF_H */
