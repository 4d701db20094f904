/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The build-ID prepass: a sleepable task iterator that reads the GNU build
 * ID of every ELF file mapped at page offset 0 from the mapping process's
 * own memory, and caches it by file (struct synth_file_key), so that the
 * MMAP2 iterator can emit records in build-ID form.
 *
 * bpf_copy_from_user_task() takes the target's mmap lock. The VMAs are
 * walked with the open-coded task_vma iterator, which holds that lock, so
 * the candidates are collected first and read only after
 * bpf_iter_task_vma_destroy() has dropped it: copying under the lock
 * could deadlock against a queued writer.
 *
 * Parsing is bounded: at most SYNTH_MAX_PHDRS program headers and
 * SYNTH_NOTE_BYTES of notes per PT_NOTE; anything outside the mapping,
 * or a size that does not add up, gives no build ID from BPF and leaves
 * the file to userspace (struct synth_pending).
 */
#ifndef SYNTH_BUILDID_BPF_H
#define SYNTH_BUILDID_BPF_H

#define SYNTH_MAX_CANDS 64
#define SYNTH_MAX_PHDRS 32
#define SYNTH_MAX_NOTES 8
#define SYNTH_NOTE_BYTES 512
#define PT_NOTE 4
#define NT_GNU_BUILD_ID 3
#define ELFCLASS64 2

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it,
				 struct task_struct *task, __u64 addr) __ksym;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct synth_file_key);
	__type(value, struct synth_build_id);
} build_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct synth_file_key);
	__type(value, struct synth_pending);
} pending SEC(".maps");

struct cand {
	struct synth_file_key key;
	__u64 start, end;
};

struct cands {
	__u32 n; /* in the map, not a register: the VMA loop's states converge */
	__u64 last; /* the file of the VMA before, as a number */
	struct cand c[SYNTH_MAX_CANDS];
	struct synth_build_id id;
	__u8 notes[SYNTH_NOTE_BYTES + 32]; /* slack: masked offsets + a u32 or an id stay inside */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cands);
} cand_scratch SEC(".maps");

/* Read by userspace: ELF headers read, build IDs found, files without. */
__u64 bid_reads;
__u64 bid_found;
__u64 bid_none;

static __always_inline void file_key(struct file *file, struct synth_file_key *k)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);

	k->ino = BPF_CORE_READ(inode, i_ino);
	k->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	k->generation = BPF_CORE_READ(inode, i_generation);
	k->ctime_sec = BPF_CORE_READ(inode, i_ctime_sec);
	/* Multigrain timestamps (6.13+) keep a "queried" flag in the top
	 * bit of i_ctime_nsec: a stat() of the file flips it. Nanoseconds
	 * fit in 30 bits. */
	k->ctime_nsec = BPF_CORE_READ(inode, i_ctime_nsec) & ((1U << 30) - 1);
	k->pad = 0;
}

static __always_inline void pend(struct synth_file_key *k, __u32 pid,
				 __u64 start, __u64 end, __u32 reason)
{
	struct synth_pending p = { .start = start, .end = end, .pid = pid, .reason = reason };

	bpf_map_update_elem(&pending, k, &p, BPF_NOEXIST);
}

/* An offset into the notes buffer that the verifier can see is inside
 * it: clang drops a mask it proves redundant, so hide the value first. */
static __always_inline __u64 note_off(__u64 x)
{
	asm volatile("" : "+r"(x));
	return x & (SYNTH_NOTE_BYTES - 1);
}

/* Walk of the notes in buf[0, n), one note per bpf_loop step. */
struct note_walk {
	const __u8 *buf;
	struct synth_build_id *id;
	__u32 n, off;
	bool found;
};

static long walk_note(__u64 i, struct note_walk *w)
{
	__u32 off = w->off, namesz, descsz, type, desc;

	if (off + 12 > w->n || off > SYNTH_NOTE_BYTES - 12)
		return 1;
	namesz = *(__u32 *)&w->buf[note_off(off)];
	descsz = *(__u32 *)&w->buf[note_off(off + 4)];
	type = *(__u32 *)&w->buf[note_off(off + 8)];
	if (namesz > SYNTH_NOTE_BYTES || descsz > SYNTH_NOTE_BYTES)
		return 1;
	desc = off + 12 + ((namesz + 3) & ~3);
	if (desc + ((descsz + 3) & ~3) > w->n)
		return 1; /* a size that lies */
	if (namesz == 4 && type == NT_GNU_BUILD_ID && descsz > 0 &&
	    descsz <= SYNTH_BUILD_ID_SIZE &&
	    *(__u32 *)&w->buf[note_off(off + 12)] == 0x00554e47 /* "GNU\0" */) {
		w->id->size = descsz;
		__builtin_memcpy(w->id->id, &w->buf[note_off(desc)], SYNTH_BUILD_ID_SIZE);
		w->found = true;
		return 1;
	}
	w->off = desc + ((descsz + 3) & ~3);
	return 0;
}

/* Walk of the program headers of the ELF file mapped at c->start (page
 * offset 0, c->end - c->start bytes), one header per bpf_loop step. */
struct phdr_walk {
	struct task_struct *task;
	struct cands *cs;
	struct cand *c;
	__u64 phoff;
	__u32 reason; /* SYNTH_PEND_*, or 0 */
	bool found;
};

static long walk_phdr(__u64 i, struct phdr_walk *w)
{
	struct cand *c = w->c;
	__u64 len = c->end - c->start;
	struct note_walk nw = {};
	Elf64_Phdr ph;
	__u32 n;

	if (bpf_copy_from_user_task(&ph, sizeof(ph),
				    (void *)(c->start + w->phoff + i * sizeof(ph)), w->task, 0)) {
		w->reason = SYNTH_PEND_FAULT;
		return 1;
	}
	if (ph.p_type != PT_NOTE)
		return 0;
	if (ph.p_offset >= len || ph.p_filesz > len - ph.p_offset) {
		w->reason = SYNTH_PEND_RANGE;
		return 1;
	}
	n = ph.p_filesz < SYNTH_NOTE_BYTES - 1 ? ph.p_filesz : SYNTH_NOTE_BYTES - 1;
	if (n < 12)
		return 0;
	/* A mask the verifier can see: n stays within notes[]. */
	n &= SYNTH_NOTE_BYTES - 1;
	if (bpf_copy_from_user_task(w->cs->notes, n, (void *)(c->start + ph.p_offset), w->task, 0)) {
		w->reason = SYNTH_PEND_FAULT;
		return 1;
	}
	nw.buf = w->cs->notes;
	nw.id = &w->cs->id;
	nw.n = n;
	bpf_loop(SYNTH_MAX_NOTES, walk_note, &nw, 0);
	w->found = nw.found;
	return nw.found;
}

/* Read the build ID of the ELF file mapped at c->start into cs->id.
 * Returns 0 (cs->id.size 0: no build ID), or a SYNTH_PEND_ reason. */
static __always_inline __u32 read_build_id(struct task_struct *task, struct cands *cs,
					    struct cand *c)
{
	__u64 len = c->end - c->start;
	struct phdr_walk w = { .task = task, .cs = cs, .c = c };
	Elf64_Ehdr eh;

	__sync_fetch_and_add(&bid_reads, 1);
	if (bpf_copy_from_user_task(&eh, sizeof(eh), (void *)c->start, task, 0))
		return SYNTH_PEND_FAULT;
	if (*(__u32 *)eh.e_ident != 0x464c457f) /* "\x7fELF": not ELF, no build ID */
		return 0;
	if (eh.e_ident[4] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
		return SYNTH_PEND_CLASS;
	if (eh.e_phoff >= len || eh.e_phnum > SYNTH_MAX_PHDRS ||
	    eh.e_phoff + eh.e_phnum * sizeof(Elf64_Phdr) > len)
		return SYNTH_PEND_RANGE;
	w.phoff = eh.e_phoff;
	bpf_loop(eh.e_phnum, walk_phdr, &w, 0);
	return w.reason;
}

struct read_ctx {
	struct task_struct *task;
	struct cands *cs;
	__u32 pid;
};

static long read_cand(__u64 i, struct read_ctx *rc)
{
	struct synth_build_id *id = &rc->cs->id;
	struct cand *c;
	__u32 reason;

	if (i >= SYNTH_MAX_CANDS)
		return 1;
	c = &rc->cs->c[i];
	if (bpf_map_lookup_elem(&build_ids, &c->key))
		return 0; /* the same file at offset 0 twice */
	__builtin_memset(id, 0, sizeof(*id));
	id->source = SYNTH_BID_BPF;
	reason = read_build_id(rc->task, rc->cs, c);
	if (reason) {
		pend(&c->key, rc->pid, c->start, c->end, reason);
		return 0;
	}
	__sync_fetch_and_add(id->size ? &bid_found : &bid_none, 1);
	bpf_map_update_elem(&build_ids, &c->key, id, BPF_ANY);
	bpf_map_delete_elem(&pending, &c->key);
	return 0;
}

SEC("iter.s/task")
int build_ids_prepass(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;
	struct cands *cs;
	__u32 zero = 0, n = 0, pid;

	if (!task || task->pid != task->tgid || !task->mm)
		return 0;
	cs = bpf_map_lookup_elem(&cand_scratch, &zero);
	if (!cs)
		return 0;
	pid = task->tgid;
	cs->n = 0;
	cs->last = 0;
	bpf_iter_task_vma_new(&it, task, 0);
	while ((vma = bpf_iter_task_vma_next(&it))) {
		struct synth_file_key k;
		struct file *file = vma->vm_file;

		if (!file)
			continue;
		/* A file's later segments follow its first: when this VMA maps
		 * the same file as the one before at an offset, it has nothing
		 * new to say. Saves the key reads and lookups that dominate
		 * processes with thousands of VMAs of a few files. */
		if (vma->vm_pgoff != 0 && cs->last == (__u64)file)
			continue;
		cs->last = (__u64)file;
		file_key(file, &k);
		if (bpf_map_lookup_elem(&build_ids, &k))
			continue;
		if (vma->vm_pgoff != 0) {
			pend(&k, pid, vma->vm_start, vma->vm_end, SYNTH_PEND_OFFSET);
			continue;
		}
		n = cs->n;
		if (n >= SYNTH_MAX_CANDS) {
			pend(&k, pid, vma->vm_start, vma->vm_end, SYNTH_PEND_MANY);
			continue;
		}
		cs->c[n].key = k;
		cs->c[n].start = vma->vm_start;
		cs->c[n].end = vma->vm_end;
		cs->n = n + 1;
	}
	n = cs->n;
	bpf_iter_task_vma_destroy(&it); /* drops the mmap lock: now copy */

	/* One bpf_loop callback per candidate keeps the verifier's work
	 * linear in the candidates instead of multiplying the loops. */
	struct read_ctx rc = { .task = task, .cs = cs, .pid = pid };
	bpf_loop(n, read_cand, &rc, 0);
	return 0;
}

#endif /* SYNTH_BUILDID_BPF_H */
