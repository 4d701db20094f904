/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What every program that emits records shares: the rings (events), the
 * settings userspace gives each dump, the pacing, and the builders of
 * the records in perf's layout (synth.h): FORK, NAMESPACES, COMM and
 * MMAP2, and the rule of which task reports a process's VMAs. The
 * programs are in synth.bpf.c (and cmd/synth/internal/bench/floor); the
 * headers that build on this one (walk.bpf.h, unmap.bpf.h) include it first.
 */
#ifndef SYNTH_RECORD_BPF_H
#define SYNTH_RECORD_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "synth.h"
#include "buildid.bpf.h"
#include "pidns.bpf.h"

/* include/linux/mm.h, include/uapi/asm-generic/mman*.h */
#define VM_READ 0x00000001
#define VM_WRITE 0x00000002
#define VM_EXEC 0x00000004
#define VM_MAYSHARE 0x00000080
#define VM_LOCKED 0x00002000
#define VM_HUGETLB 0x00400000
#define PROT_READ 0x1
#define PROT_WRITE 0x2
#define PROT_EXEC 0x4
#define MAP_SHARED 0x01
#define MAP_PRIVATE 0x02
#define MAP_LOCKED 0x02000
#define MAP_HUGETLB 0x40000
#define MINORBITS 20 /* include/linux/kdev_t.h */

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

/* tgid -> the tid that reports the process's VMAs in this generation,
 * used only when the thread group leader has already released its mm. */
struct claim {
	__u64 gen;
	__u32 tid;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct claim);
} claims SEC(".maps");

/* Set by userspace before the programs load, from the running kernel:
 * constants to the verifier. The page size is the kernel's (4K on
 * x86-64; 4K, 16K or 64K on arm64), and vm_pgoff counts pages of it.
 * Only x86-64 has a [vsyscall] page, and only there does bit
 * MM_CONTEXT_HAS_VSYSCALL of mm->context.flags say so: arm64's
 * mm_context_t flags mean other things. */
const volatile __u32 page_shift = 12;
const volatile __u32 x86_vsyscall;

/* Set by userspace before each dump. */
volatile __u64 synth_gen;
volatile __u32 synth_flags;
/* The device of nsfs, which every namespace file has (stat(2)'s st_dev
 * of /proc/self/ns/net): the programs know only the inode numbers. */
volatile __u64 synth_ns_dev;

/* Read by userspace after each dump. */
__u64 synth_seq;
__u64 synth_lost;

static const char pace[256];

/* Writes the pacing bytes of a write of size bytes into the rings:
 * userspace reads them with a bounded buffer and drains the rings
 * between reads (synth.h, SYNTH_PACE_UNIT). */
static __always_inline void pace_out(struct seq_file *seq, __u32 size)
{
	__u32 n = (size + SYNTH_SAMPLE_OVERHEAD + SYNTH_PACE_UNIT - 1) / SYNTH_PACE_UNIT;

	if (n > sizeof(pace))
		n = sizeof(pace);
	bpf_seq_write(seq, pace, n);
}

/* Writes one record, h and the size bytes after it, into the CPU's ring,
 * and paces it. */
static __always_inline void emit(void *ctx, struct seq_file *seq,
				 struct synth_hdr *h, __u32 size)
{
	h->gen = synth_gen;
	h->seq = __sync_fetch_and_add(&synth_seq, 1);
	if (bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, h, size) < 0) {
		__sync_fetch_and_add(&synth_lost, 1);
		return;
	}
	pace_out(seq, size);
}

/* PERF_RECORD_COMM of task, its name NUL-padded to 8 bytes as the
 * kernel pads it. Returns the record's size from its header on, a
 * bounded register: the size passed on must be derived from it, not
 * reloaded from header.size, for the verifier to accept the read. */
static __always_inline __u32 fill_comm(struct synth_comm *c, struct task_struct *task,
				       __u32 pid, __u32 tid)
{
	__u32 size;
	long n;

	c->pid = pid;
	c->tid = tid;
	__builtin_memset(c->comm, 0, sizeof(c->comm));
	n = bpf_probe_read_kernel_str(c->comm, sizeof(c->comm), task->comm);
	if (n <= 0)
		n = 1;
	n = (n + 7) & ~7;
	if (n > SYNTH_COMM_LEN)
		n = SYNTH_COMM_LEN;
	size = sizeof(struct perf_event_header) + 8 + n;
	c->header.type = SYNTH_RECORD_COMM;
	c->header.misc = 0;
	c->header.size = size;
	return size;
}

/* Emits the COMM of task, built on the stack. */
static __always_inline void emit_comm(void *ctx, struct seq_file *seq, struct task_struct *task,
				      __u32 pid, __u32 tid, __u64 now)
{
	struct synth_comm c = {};
	__u32 size;

	c.h.time = now;
	size = fill_comm(&c, task, pid, tid);
	emit(ctx, seq, &c.h, sizeof(c.h) + size);
}

/* arch/x86/include/asm/mmu.h: the bit of mm->context.flags that
 * set_personality_64bit() sets. */
#define MM_CONTEXT_HAS_VSYSCALL 1

/* mm->context.flags, read at the size this kernel gives it: an unsigned
 * short on 6.1, an unsigned long on 6.12 and later. A direct load of
 * vmlinux.h's 8 bytes is rejected where the field has 2. */
static __always_inline __u64 mm_context_flags(struct mm_struct *mm)
{
	__u32 size = bpf_core_field_size(mm->context.flags);
	__u64 flags = 0;

	if (size > sizeof(flags))
		size = sizeof(flags);
	bpf_probe_read_kernel(&flags, size, __builtin_preserve_access_index(&mm->context.flags));
	return flags;
}

/* PERF_RECORD_FORK as perf synthesizes it (tools/perf/util/
 * synthetic-events.c): a leader names its parent process, any other
 * thread its leader, as if the main thread had spawned it.
 *
 * Pointer fields of the task are read with BPF_CORE_READ here and in
 * fill_namespaces, not loaded: dump_task's task is trusted, and at each
 * load of a pointer field of a trusted pointer, in each state it checks
 * it in, the verifier searches vmlinux BTF by name for
 * "task_struct__safe_*" (btf_nested_type_is_trusted), most of
 * dump_task's load time. */
static __always_inline void fill_fork(struct synth_fork *f, struct task_struct *task,
				      const struct pidns *ns, __u32 pid, __u32 tid)
{
	struct mm_struct *mm;

	f->header.type = SYNTH_RECORD_FORK;
	f->header.misc = SYNTH_MISC_FORK_EXEC;
	f->header.size = sizeof(struct perf_event_header) + 24;
	f->pid = pid;
	f->tid = tid;
	f->time = 0;
	if (tid != pid) {
		f->ppid = f->ptid = pid;
		return;
	}
	/* /proc/PID/status's PPid: 0 for init and kthreadd, whose parent
	 * is the idle task, and for the init of a pid namespace. */
	f->ppid = f->ptid = pidns_ppid(task, ns);
	mm = BPF_CORE_READ(task, mm);
	if (x86_vsyscall && mm && !(mm_context_flags(mm) & (1UL << MM_CONTEXT_HAS_VSYSCALL)))
		f->header.misc |= SYNTH_MISC_NO_GATE;
}

/* The inode number of nsp's namespace field, 0 for none (a NULL
 * pointer's read fails, and a failed read zeroes its destination). */
#define NS_INUM(nsp, field) BPF_CORE_READ(nsp, field, ns.inum)

/* PERF_RECORD_NAMESPACES of task: the namespaces /proc/PID/ns/ names
 * (fs/proc/namespaces.c), as perf --namespaces synthesizes them from
 * stat(2) of those files. A task past exit_task_namespaces() has none:
 * perf cannot stat them either, and writes zeros. */
static __always_inline void fill_namespaces(struct synth_namespaces *r, struct task_struct *task,
					    __u32 tgid, __u32 tid)
{
	struct nsproxy *nsp = BPF_CORE_READ(task, nsproxy);
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	struct pid_namespace *pidns = NULL;
	__u32 i, level;

	r->header.type = SYNTH_RECORD_NAMESPACES;
	r->header.misc = 0;
	r->header.size = sizeof(*r) - sizeof(r->h);
	r->pid = tgid;
	r->tid = tid;
	r->nr_namespaces = SYNTH_NR_NAMESPACES;
	__builtin_memset(r->link, 0, sizeof(r->link));
	if (!nsp)
		return;
	r->link[0].ino = NS_INUM(nsp, net_ns);
	r->link[1].ino = NS_INUM(nsp, uts_ns);
	r->link[2].ino = NS_INUM(nsp, ipc_ns);
	if (pid) {
		/* task_active_pid_ns(): the namespace of the pid's own level,
		 * an element of a flexible array: read, not loaded. */
		unsigned int inum = 0;

		level = BPF_CORE_READ(pid, level);
		bpf_probe_read_kernel(&pidns, sizeof(pidns), &pid->numbers[level & 31].ns);
		if (pidns)
			bpf_probe_read_kernel(&inum, sizeof(inum), &pidns->ns.inum);
		r->link[3].ino = inum;
	}
	r->link[4].ino = BPF_CORE_READ(task, real_cred, user_ns, ns.inum);
	r->link[5].ino = NS_INUM(nsp, mnt_ns);
	r->link[6].ino = NS_INUM(nsp, cgroup_ns);
	for (i = 0; i < SYNTH_NR_NAMESPACES; i++)
		if (r->link[i].ino)
			r->link[i].dev = synth_ns_dev;
}

#define PF_EXITING 0x00000004        /* include/linux/sched.h */
#define SIGNAL_GROUP_EXIT 0x00000004 /* include/linux/sched/signal.h */

/* Whether a dump leaves task out: it is exiting, or has exited (a zombie
 * its parent has not reaped), or its process is: exit_group(2), a fatal
 * signal and a core dump set SIGNAL_GROUP_EXIT before any of its threads
 * starts to exit. do_exit() sets PF_EXITING before the task lets go of
 * its mm and before the kernel reports its EXIT, so a task read without
 * either (loaded after the read's time was taken) reports its EXIT, and
 * its process's main thread its own (the one that removes the process),
 * after that time: a dump's read never supersedes such an EXIT. A task
 * seen exiting is not read at all, so that its EXIT applies whenever it
 * came, and a zombie, whose EXIT came before, is never reported again;
 * nor is a thread of a dying process, which the kernel may run long
 * after its main thread's EXIT (one stuck in an uninterruptible wait)
 * (DESIGN.md, "The live side-band"). */
static __always_inline bool task_exiting(struct task_struct *task)
{
	return (task->flags & PF_EXITING) ||
	       (BPF_CORE_READ(task, signal, flags) & SIGNAL_GROUP_EXIT);
}

/* Whether task reports its process's VMAs: the leader does, unless it has
 * already exited, in which case the first thread seen in this generation. */
static __always_inline bool reports_vmas(struct task_struct *task)
{
	struct claim c = { .gen = synth_gen, .tid = task->pid }, *old;
	__u32 tgid = task->tgid;

	if (task->pid == tgid)
		return true;
	if (BPF_CORE_READ(task, group_leader, mm))
		return false;
	old = bpf_map_lookup_elem(&claims, &tgid);
	if (old && old->gen == c.gen)
		return old->tid == c.tid;
	bpf_map_update_elem(&claims, &tgid, &c, BPF_ANY);
	return true;
}

static __always_inline __u32 copy_str(char *dst, const char *src)
{
	long n = bpf_probe_read_kernel_str(dst, 64, src);

	return n > 0 ? n : 0;
}

/* The name /proc/PID/maps shows for a VMA without a file
 * (fs/proc/task_mmu.c get_vma_name), or "//anon" as perf does. */
static __always_inline __u32 anon_name(struct vm_area_struct *vma, char *dst)
{
	struct mm_struct *mm = vma->vm_mm;
	const struct vm_operations_struct *ops = vma->vm_ops;
	unsigned long start = vma->vm_start, end = vma->vm_end;

	/* Direct loads, not helper calls: for the maple walk's VMAs, which
	 * the verifier does not trust, they are fault-safe loads. */
	if (ops && ops->name) {
		/* special mappings ([vdso], [vvar], [uprobes]):
		 * special_mapping_name() returns vm_special_mapping.name.
		 * vm_private_data is a void *: a number to the verifier
		 * before 6.18, so read through it, not loaded. */
		struct vm_special_mapping *sm = vma->vm_private_data;
		const char *name = sm ? BPF_CORE_READ(sm, name) : NULL;

		if (name)
			return copy_str(dst, name);
	}
	/* The names that fit in a word are stored, not copied. */
	if (start < mm->brk && end > mm->start_brk) {
		__builtin_memcpy(dst, "[heap]\0", 8);
		return 7;
	}
	if (start <= mm->start_stack && end >= mm->start_stack) {
		__builtin_memcpy(dst, "[stack]", 8);
		return 8;
	}
	__builtin_memcpy(dst, "//anon\0", 8);
	return 7;
}

/* Identifies the file in r: by its build ID when id has one, else by
 * device and inode. */
static __always_inline void fill_ident(struct synth_mmap2 *r, struct synth_file_key *k,
				       struct synth_build_id *id)
{
	if (id && id->size) {
		r->header.misc |= SYNTH_MISC_MMAP_BUILD_ID;
		r->u.b.size = id->size;
		r->u.b.reserved[0] = r->u.b.reserved[1] = r->u.b.reserved[2] = 0;
		__builtin_memcpy(r->u.b.id, id->id, SYNTH_BUILD_ID_SIZE);
		return;
	}
	r->u.f.maj = k->dev >> MINORBITS;
	r->u.f.min = k->dev & ((1U << MINORBITS) - 1);
	r->u.f.ino = k->ino;
	r->u.f.ino_generation = k->generation;
}

/* Identify the file: by build ID when the cache knows one, else by
 * device and inode. A file the cache does not know is noted for
 * userspace to read, through this mapping unless one is noted already:
 * the maple walk's fallback reads processes whose walk stopped before
 * it reached their later files. */
static __always_inline bool fill_file(struct synth_mmap2 *r, struct file *file,
				      struct vm_area_struct *vma, struct synth_file_key *k)
{
	struct synth_build_id *id = NULL;
	bool pended = false;

	file_key(file, k);
	if (synth_flags & SYNTH_CFG_BUILDID) {
		id = bpf_map_lookup_elem(&build_ids, k);
		if (!id)
			pended = pend(k, r->pid, vma->vm_start, vma->vm_end);
	}
	fill_ident(r, k, id);
	return pended;
}

/* The fields of an MMAP2 record that the VMA's bounds and flags give. */
static __always_inline void fill_vma(struct synth_mmap2 *r, __u32 pid, __u32 tid,
				     __u64 start, __u64 end, __u64 vmf)
{
	r->header.type = SYNTH_RECORD_MMAP2;
	r->header.misc = SYNTH_MISC_USER | ((vmf & VM_EXEC) ? 0 : SYNTH_MISC_MMAP_DATA);
	r->pid = pid;
	r->tid = tid;
	r->addr = start;
	r->len = end - start;
	r->prot = ((vmf & VM_READ) ? PROT_READ : 0) | ((vmf & VM_WRITE) ? PROT_WRITE : 0) |
		  ((vmf & VM_EXEC) ? PROT_EXEC : 0);
	r->flags = (vmf & VM_MAYSHARE) ? MAP_SHARED : MAP_PRIVATE;
	if (vmf & VM_LOCKED)
		r->flags |= MAP_LOCKED;
	if (vmf & VM_HUGETLB)
		r->flags |= MAP_HUGETLB;
}

/* Ends an MMAP2 record whose name is n bytes long, its NUL included (0 or
 * less: no name): NUL-pads the name to 8 bytes as the kernel does, and
 * sets header.size. Returns the record's size from struct synth_hdr on,
 * a bounded register: the size passed on is derived from it, not
 * reloaded from header.size. */
static __always_inline __u32 finish_mmap2(struct synth_mmap2 *r, long n)
{
	if (n <= 0) {
		r->filename[0] = 0;
		n = 1;
	}
	if (n > SYNTH_PATH_MAX)
		n = SYNTH_PATH_MAX;
	for (int i = 0; i < 7; i++) {
		__u32 at = n + i;

		if (at & 7)
			r->filename[at & (SYNTH_PATH_MAX - 1)] = 0;
		else
			break;
	}
	n = (n + 7) & ~7;
	if (n > SYNTH_PATH_MAX)
		n = SYNTH_PATH_MAX;
	r->header.size = offsetof(struct synth_mmap2, filename) -
			 offsetof(struct synth_mmap2, header) + n;
	return offsetof(struct synth_mmap2, filename) + n;
}

#endif /* SYNTH_RECORD_BPF_H */
