/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records that the synth iterators emit with bpf_perf_event_output().
 *
 * Every payload starts with struct synth_hdr, followed by a complete
 * perf record (struct perf_event_header and body, as laid out in
 * include/uapi/linux/perf_event.h) without its sample_id trailer:
 * userspace appends the trailer that matches the perf.data attr it writes.
 * The Go side mirrors these layouts in synth/bpfrec.go.
 */
#ifndef SYNTH_H
#define SYNTH_H

#define SYNTH_PATH_MAX 4096
#define SYNTH_COMM_LEN 16

/* One pacing byte is written to the iterator's seq_file per
 * SYNTH_PACE_UNIT bytes of emitted records, so that a bounded read()
 * of the iterator fd bounds what one read can push into the rings. */
#define SYNTH_PACE_UNIT 64

/* What each bpf_perf_event_output() sample adds around its data in the
 * ring with sample_type TID|TIME|RAW: perf_event_header (8), pid and tid
 * (8), time (8), raw size (4), and up to 7 bytes of padding to 8 bytes
 * (rounded up to 32). The pacing counts it, so that pacing bytes bound
 * ring bytes, not just record bytes. */
#define SYNTH_SAMPLE_OVERHEAD 32

/* PERF_RECORD_* and PERF_RECORD_MISC_* (include/uapi/linux/perf_event.h) */
#define SYNTH_RECORD_COMM 3
#define SYNTH_RECORD_FORK 7
#define SYNTH_RECORD_MMAP2 10
#define SYNTH_MISC_USER 2
#define SYNTH_MISC_MMAP_DATA (1 << 13)

/* synth_cfg.flags */
#define SYNTH_CFG_DATA 1 /* all maps, not only executable ones (perf -d) */

struct synth_hdr {
	__u64 gen;  /* dump generation (synth_cfg.gen at emission) */
	__u64 seq;  /* emission order within the dump */
	__u64 time; /* bpf_ktime_get_ns() when the object was read */
};

/* PERF_RECORD_MMAP2, maj/min/ino form. */
struct synth_mmap2 {
	struct synth_hdr h;
	struct perf_event_header header;
	__u32 pid, tid;
	__u64 addr, len, pgoff;
	__u32 maj, min;
	__u64 ino, ino_generation;
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

#endif /* SYNTH_H */
