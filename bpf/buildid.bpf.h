/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The build-ID cache, by file (struct synth_file_key), and the files the
 * programs found that it does not hold yet (pending).
 *
 * The programs never read a build ID themselves. Reading it from the
 * mapping process's memory, as bpf_copy_from_user_task() would, trusts
 * that process: it can make its private copy of the ELF header page
 * writable and rewrite the note, and the forged ID would then be cached
 * for every process mapping the file. And faulting in a page of a file
 * whose reads block (FUSE, a network filesystem) could stall the dump in
 * an uninterruptible sleep. So a file new to the cache is only noted, with
 * one mapping of it; userspace reads the note from the file's own pages
 * through /proc/PID/map_files, on a worker with a deadline, and fills
 * the cache.
 */
#ifndef SYNTH_BUILDID_BPF_H
#define SYNTH_BUILDID_BPF_H


/* A session that runs for weeks on a host that keeps deploying new
 * binaries sees more files than the cache holds. Userspace fills it, and
 * empties it when an update finds it full: a new generation of the
 * cache, each file of it a miss, noted pending and read again. Both maps
 * are allocated as they fill (BPF_F_NO_PREALLOC): an LRU hash is always
 * preallocated, and one of this size took 12 ms of every start. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct synth_file_key);
	__type(value, struct synth_build_id);
} build_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct synth_file_key);
	__type(value, struct synth_pending);
} pending SEC(".maps");

/* struct inode's times before 6.11, as CO-RE flavors: a timespec64 each,
 * named i_ctime/i_mtime up to 6.5, __i_ctime from 6.6 and __i_mtime from
 * 6.7 (include/linux/fs.h). 6.11 split them into i_ctime_sec and
 * i_ctime_nsec, the layout of vmlinux.h. */
struct inode___ts64 {
	struct timespec64 i_ctime;
	struct timespec64 i_mtime;
} __attribute__((preserve_access_index));

struct inode___ts64_private {
	struct timespec64 __i_ctime;
	struct timespec64 __i_mtime;
} __attribute__((preserve_access_index));

/* The change and modification times of inode, whichever way this kernel
 * stores them. Multigrain timestamps (6.13+) keep a "queried" flag in the
 * top bit of i_ctime_nsec: a stat() of the file flips it. Nanoseconds fit
 * in 30 bits. */
static __always_inline void inode_times(struct inode *inode, struct synth_file_key *k)
{
	if (bpf_core_field_exists(inode->i_ctime_sec)) {
		k->ctime_sec = BPF_CORE_READ(inode, i_ctime_sec);
		k->ctime_nsec = BPF_CORE_READ(inode, i_ctime_nsec);
		k->mtime_sec = BPF_CORE_READ(inode, i_mtime_sec);
		k->mtime_nsec = BPF_CORE_READ(inode, i_mtime_nsec);
	} else if (bpf_core_field_exists(((struct inode___ts64 *)inode)->i_ctime)) {
		struct inode___ts64 *old = (void *)inode;

		k->ctime_sec = BPF_CORE_READ(old, i_ctime.tv_sec);
		k->ctime_nsec = BPF_CORE_READ(old, i_ctime.tv_nsec);
		k->mtime_sec = BPF_CORE_READ(old, i_mtime.tv_sec);
		k->mtime_nsec = BPF_CORE_READ(old, i_mtime.tv_nsec);
	} else {
		struct inode___ts64_private *old = (void *)inode;
		struct inode___ts64 *mid = (void *)inode;

		k->ctime_sec = BPF_CORE_READ(old, __i_ctime.tv_sec);
		k->ctime_nsec = BPF_CORE_READ(old, __i_ctime.tv_nsec);
		/* 6.6 renamed only the change time */
		if (bpf_core_field_exists(old->__i_mtime)) {
			k->mtime_sec = BPF_CORE_READ(old, __i_mtime.tv_sec);
			k->mtime_nsec = BPF_CORE_READ(old, __i_mtime.tv_nsec);
		} else {
			k->mtime_sec = BPF_CORE_READ(mid, i_mtime.tv_sec);
			k->mtime_nsec = BPF_CORE_READ(mid, i_mtime.tv_nsec);
		}
	}
	k->ctime_nsec &= (1U << 30) - 1;
}

static __always_inline void file_key(struct file *file, struct synth_file_key *k)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);

	k->ino = BPF_CORE_READ(inode, i_ino);
	k->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	k->generation = BPF_CORE_READ(inode, i_generation);
	inode_times(inode, k);
}

/* Note a file for userspace, with the mapping [start, end) of process
 * pid; the first mapping noted for a file stays. A full map notes no
 * more: those files are written without a build ID this time, and noted
 * by the next dump. */
static __always_inline bool pend(struct synth_file_key *k, __u32 pid, __u64 start, __u64 end)
{
	struct synth_pending p = { .start = start, .end = end, .pid = pid };

	return bpf_map_update_elem(&pending, k, &p, BPF_NOEXIST) == 0;
}

/* Fills the record that tells userspace of a file pend() just noted. */
static __always_inline void fill_pending_rec(struct synth_pending_rec *pr, struct synth_file_key *k,
					     __u32 pid, __u64 start, __u64 end)
{
	pr->header.type = SYNTH_RECORD_PENDING;
	pr->header.misc = 0;
	pr->header.size = sizeof(*pr) - sizeof(pr->h);
	pr->pid = pr->tid = pid;
	pr->key = *k;
	pr->start = start;
	pr->end = end;
}

#endif /* SYNTH_BUILDID_BPF_H */
