/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Records that the synth iterators emit with bpf_perf_event_output().
 *
 * Every payload starts with struct synth_hdr, followed by a complete
 * perf record (struct perf_event_header and body, as laid out in
 * include/uapi/linux/perf_event.h) without its sample_id trailer:
 * userspace appends the trailer that matches the perf.data attr it writes.
 * The Go side reads them in internal/method/bpfmethod (bpfrec.go, walk.go).
 */
#ifndef SYNTH_H
#define SYNTH_H

/*
 * The contract with the Go reader is written once, here, as enums:
 * bpf2go exports each enum (-type, bpf/gen.go) and the reader uses the
 * generated constants and structs, never copies. Perf's own numbers
 * (PERF_RECORD_*, the uapi's) stay #defines: perfdata has them from the
 * uapi too.
 */

/* Sizes and limits. */
enum synth_limit {
	SYNTH_PATH_MAX = 4096,
	SYNTH_COMM_LEN = 16,
	SYNTH_BUILD_ID_SIZE = 20,
	/* One pacing byte is written to the iterator's seq_file per
	 * SYNTH_PACE_UNIT bytes of emitted records, so that a bounded
	 * read() of the iterator fd bounds what one read can push into the
	 * rings. */
	SYNTH_PACE_UNIT = 64,
	/* What each bpf_perf_event_output() sample adds around its data in
	 * the ring with sample_type IDENTIFIER|TID|TIME|RAW:
	 * perf_event_header (8), identifier (8), pid and tid (8), time (8),
	 * raw size (4), and up to 7 bytes of padding to 8 bytes (rounded up
	 * to 48). The pacing counts it, so that pacing bytes bound ring
	 * bytes, not just record bytes. */
	SYNTH_SAMPLE_OVERHEAD = 48,
	/* Records of the maple walk are emitted in batches of about this
	 * many bytes per bpf_perf_event_output() sample. */
	SYNTH_BATCH = 8192,
};

/* PERF_RECORD_* and PERF_RECORD_MISC_* (include/uapi/linux/perf_event.h) */
#define SYNTH_RECORD_COMM 3
#define SYNTH_RECORD_FORK 7
#define SYNTH_RECORD_MMAP2 10
#define SYNTH_RECORD_NAMESPACES 16
#define SYNTH_MISC_USER 2
#define SYNTH_MISC_MMAP_DATA (1 << 13)
#define SYNTH_MISC_FORK_EXEC (1 << 13)

/* On a leader's FORK, for userspace only (it clears the bit): the
 * process's mm has no [vsyscall] page, a 32-bit process on x86-64
 * (get_gate_vma() in arch/x86/entry/vsyscall/vsyscall_64.c). */
#define SYNTH_MISC_NO_GATE (1 << 15)

#define SYNTH_MISC_MMAP_BUILD_ID (1 << 14)

/* Bits of synth_flags, set by userspace before each dump. */
enum synth_cfg {
	SYNTH_CFG_DATA = 1,       /* all maps, not only executable ones (perf -d) */
	SYNTH_CFG_BUILDID = 2,    /* MMAP2 in build-ID form where the ID is known */
	SYNTH_CFG_NAMESPACES = 4, /* NAMESPACES for every task (perf --namespaces) */
};

/* The synth-private record types, above any perf has; each is described
 * with its struct below. */
enum synth_record_type {
	SYNTH_RECORD_WALK = 0x5e00,
	SYNTH_RECORD_MMAP2_NEXT = 0x5e01,
	SYNTH_RECORD_PENDING = 0x5e02,
	SYNTH_RECORD_UNMAP = 0x5e03,
};

/* Key of the build-ID cache. It names a file's contents for as long as
 * they do not change: a new file on the same inode number gets a new
 * generation or change time, and a write changes the modification time
 * (a write through a shared mapping when the page is made writable; on
 * tmpfs, whose pages stay writable, userspace does not cache at all). */
struct synth_file_key {
	__u64 ino;
	__s64 ctime_sec;
	__s64 mtime_sec;
	__u32 dev; /* kernel dev_t: major << 20 | minor */
	__u32 ctime_nsec;
	__u32 mtime_nsec;
	__u32 generation;
};

/* Value of the build-ID cache; size 0: the file has no GNU build ID.
 * Userspace reads every build ID from the file itself and writes it
 * here; the programs only look it up. */
struct synth_build_id {
	__u8 size;
	__u8 pad[3];
	__u8 id[SYNTH_BUILD_ID_SIZE];
};

/* A file not in the cache, and a mapping of it for userspace to read it
 * through (/proc/PID/map_files). */
struct synth_pending {
	__u64 start, end;
	__u32 pid;
	__u32 pad;
};

struct synth_hdr {
	__u64 gen;  /* dump generation (the global synth_gen at emission) */
	__u64 seq;  /* emission order within the dump */
	__u64 time; /* bpf_ktime_get_ns() when the object was read */
};

/* PERF_RECORD_MMAP2, maj/min/ino form. */
struct synth_mmap2 {
	struct synth_hdr h;
	struct perf_event_header header;
	__u32 pid, tid;
	__u64 addr, len, pgoff;
	union {
		struct {
			__u32 maj, min;
			__u64 ino, ino_generation;
		} f; /* the file's identity */
		struct {
			__u8 size;
			__u8 reserved[3];
			__u8 id[SYNTH_BUILD_ID_SIZE];
		} b; /* with PERF_RECORD_MISC_MMAP_BUILD_ID */
	} u;
	__u32 prot, flags;
	char filename[SYNTH_PATH_MAX];
};

/* PERF_RECORD_COMM */
struct synth_comm {
	struct synth_hdr h;
	struct perf_event_header header;
	__u32 pid, tid;
	char comm[SYNTH_COMM_LEN];
};

/* PERF_RECORD_FORK */
struct synth_fork {
	struct synth_hdr h;
	struct perf_event_header header;
	__u32 pid, ppid, tid, ptid;
	__u64 time;
};

/* PERF_RECORD_NAMESPACES, the namespaces in the order of
 * include/uapi/linux/perf_event.h's NET_NS_INDEX ... CGROUP_NS_INDEX. */
#define SYNTH_NR_NAMESPACES 7
struct synth_namespaces {
	struct synth_hdr h;
	struct perf_event_header header;
	__u32 pid, tid;
	__u64 nr_namespaces;
	struct {
		__u64 dev, ino;
	} link[SYNTH_NR_NAMESPACES];
};

/* SYNTH_RECORD_WALK: the end of the maple walk of one process, or of
 * one chunk of it, and its status. */
enum synth_walk_status {
	SYNTH_WALK_DONE = 1,    /* every VMA was walked and the walk holds */
	SYNTH_WALK_MORE = 2,    /* the chunk is full: walk again from resume */
	SYNTH_WALK_INVALID = 3, /* the walk does not hold: read the process again */
};

struct synth_walk {
	struct synth_hdr h;
	struct perf_event_header header;
	__u32 pid, tid;
	__u32 status; /* enum synth_walk_status */
	__u32 pad;
	__u64 count;     /* VMAs walked in this process, chunks before included */
	__u64 map_count; /* mm->map_count after the walk */
	__u64 resume;    /* with SYNTH_WALK_MORE: the address to go on from */
};

/* SYNTH_RECORD_MMAP2_NEXT: an MMAP2 record of the maple walk whose
 * process and file are those of the MMAP2 record before it in the
 * stream: userspace takes the file's identity and name from that one
 * (struct synth_mmap2_next). */

/* SYNTH_RECORD_PENDING: a file new to the build-ID cache, just noted in
 * pending, and the mapping it was noted with; userspace starts reading
 * its build ID at once, while the walk goes on. */

struct synth_pending_rec {
	struct synth_hdr h;
	struct perf_event_header header;
	__u32 pid, tid;
	struct synth_file_key key;
	__u64 start, end;
};

struct synth_mmap2_next {
	struct synth_hdr h;
	struct perf_event_header header; /* misc as the full record's */
	__u32 pid, tid;
	__u64 addr, len, pgoff;
	__u32 prot, flags;
};

/* SYNTH_RECORD_UNMAP: a range a process unmapped or moved between
 * dumps (unmap.bpf.h), for a Session's stream; never written to
 * perf.data. */

/* What a SYNTH_RECORD_UNMAP says of its range. */
enum synth_unmap_what {
	SYNTH_UNMAP_GONE = 1,   /* unmapped (munmap, mremap) */
	SYNTH_UNMAP_NOEXEC = 2, /* no longer executable (mprotect, mmap over it) */
};

struct synth_unmap {
	struct synth_hdr h;
	struct perf_event_header header;
	__u32 pid, tid;
	__u32 what; /* enum synth_unmap_what */
	__u32 pad;
	__u64 start, end; /* the range that went, [start, end) */
	/* mremap: the mapping that held start now spans [to, to_end); the
	 * kernel reports no MMAP2 for it. to == to_end: nothing. */
	__u64 to, to_end;
};

/* Every type of the contract, for the BTF bpf2go reads: an enum that
 * the programs use only by its constants is not in it otherwise. */
struct synth_contract {
	enum synth_limit limit;
	enum synth_cfg cfg;
	enum synth_record_type record_type;
	enum synth_walk_status walk_status;
	enum synth_unmap_what unmap_what;
	struct synth_unmap unmap;
};

#endif /* SYNTH_H */
