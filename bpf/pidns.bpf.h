/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Pids as the reader's pid namespace numbers them.
 *
 * A task iterator visits the tasks of the pid namespace of the process
 * that created it (task_active_pid_ns(current), init_seq_pidns() in
 * kernel/bpf/task_iter.c), and the kernel writes the pids of its own
 * records and samples in the namespace of the event's owner
 * (perf_event_pid() in kernel/events/core.c), as that namespace's /proc
 * shows them: in both, the reader's. task->pid and task->tgid are the
 * numbers of the initial namespace; a pid's number in the namespace at
 * level L is pid->numbers[L].nr, if numbers[L].ns is that namespace
 * (pid_nr_ns() in kernel/pid.c). In the initial namespace the numbers are
 * read as before, nothing else.
 */
#ifndef SYNTH_PIDNS_BPF_H
#define SYNTH_PIDNS_BPF_H

#define PIDNS_LEVEL_MASK 31 /* MAX_PID_NS_LEVEL is 32 (include/linux/pid_namespace.h) */

/* A pid namespace: its level, and itself (NULL for the initial one). */
struct pidns {
	__u32 level;
	struct pid_namespace *ns;
};

/* The reader's pid namespace: that of current's own pid level. The
 * programs run in the read(2) of the iterator, so current is the reader. */
static __always_inline void reader_pidns(struct pidns *r)
{
	struct task_struct *me = (struct task_struct *)bpf_get_current_task();
	struct pid *pid = BPF_CORE_READ(me, thread_pid);

	r->level = BPF_CORE_READ(pid, level);
	r->ns = NULL;
	if (r->level)
		bpf_probe_read_kernel(&r->ns, sizeof(r->ns),
				      &pid->numbers[r->level & PIDNS_LEVEL_MASK].ns);
}

/* The number of pid in ns, 0 if ns does not see it (a task of an
 * ancestor namespace, such as the parent of the namespace's init). The
 * numbers are a flexible array: read, not loaded. */
static __always_inline __u32 pidns_nr(struct pid *pid, const struct pidns *ns)
{
	struct upid u = {};

	if (!pid || BPF_CORE_READ(pid, level) < ns->level)
		return 0;
	bpf_probe_read_kernel(&u, sizeof(u), &pid->numbers[ns->level & PIDNS_LEVEL_MASK]);
	return u.ns == ns->ns ? u.nr : 0;
}

/* The process and thread ids of task in ns. In a namespace other than
 * the initial one either is 0 for a task released since the iterator
 * found it (release_task() detaches its struct pids): no process of the
 * namespace has it, and a record of it would name pid 0. In the initial
 * namespace they are the task's own, as perf and /proc give them. */
static __always_inline void pidns_task(struct task_struct *task, const struct pidns *ns,
				       __u32 *pid, __u32 *tid)
{
	if (!ns->level) {
		*pid = BPF_CORE_READ(task, tgid);
		*tid = BPF_CORE_READ(task, pid);
		return;
	}
	*pid = pidns_nr(BPF_CORE_READ(task, signal, pids[PIDTYPE_TGID]), ns);
	*tid = pidns_nr(BPF_CORE_READ(task, thread_pid), ns);
}

/* The process id of task's parent in ns, 0 where ns does not see it, as
 * /proc/PID/status's PPid. */
static __always_inline __u32 pidns_ppid(struct task_struct *task, const struct pidns *ns)
{
	if (!ns->level)
		return BPF_CORE_READ(task, real_parent, tgid);
	return pidns_nr(BPF_CORE_READ(task, real_parent, signal, pids[PIDTYPE_TGID]), ns);
}

#endif /* SYNTH_PIDNS_BPF_H */
