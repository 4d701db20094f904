package bpfmethod

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

// A note whose exit the kernel skipped (it skips a tracepoint program
// while another one runs on the CPU) is not reported at the exit of a
// later call of the thread: an munmap's note at the exit of an mmap, or
// a MAP_FIXED mmap's note at the exit of a plain mmap. Either would take
// away, now, what may have been mapped at that place since. The calls
// that follow are reported as before.
func TestUnmapStaleNote(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	p := testproc.StartT(t, testproc.Spec{Dir: dir})
	b, err := New(config.Resolved{Options: config.Options{NoKernel: true}, Pids: []int{p.Pid}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	testenv.Option(t, b.WatchUnmaps() == nil, "syscall tracepoints")
	// The programs report once a dump has told them the reader's pid
	// namespace.
	if _, err := b.Dump(context.Background(), func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	page := uint64(os.Getpagesize())
	lib := filepath.Join(dir, "a.so")
	if err := os.WriteFile(lib, make([]byte, 4*page), 0o644); err != nil {
		t.Fatal(err)
	}
	const staleAt = 0x10000
	stale := []struct {
		what string
		note synthbpf.SynthUnmapCall
	}{
		{"an munmap's", synthbpf.SynthUnmapCall{Addr: staleAt, Len: page,
			Kind: synthbpf.SynthUnmapCallKindCALL_MUNMAP, Nr: unix.SYS_MUNMAP}},
		{"a MAP_FIXED mmap's", synthbpf.SynthUnmapCall{Addr: staleAt, Len: page,
			Kind: synthbpf.SynthUnmapCallKindCALL_MMAP, Nr: unix.SYS_MMAP}},
	}
	for _, st := range stale {
		noteEveryThread(t, b, p.Pid, &st.note)
		if err := p.Map(lib); err != nil {
			t.Fatal(err)
		}
		if n := unmapsAt(t, b, p.Pid, staleAt); n != 0 {
			t.Errorf("%s note, skipped exit: %d unmap records of it at the exit of an mmap, want 0", st.what, n)
		}
		if err := p.Unmap(); err != nil {
			t.Fatal(err)
		}
		if n := unmapsAt(t, b, p.Pid, 0); n != 1 {
			t.Errorf("after %s note: %d unmap records of the munmap that follows, want 1", st.what, n)
		}
	}
}

// noteEveryThread puts note in the unmap programs' notes for every
// thread of process pid: one of them makes the next call.
func noteEveryThread(t *testing.T, b *BPF, pid int, note *synthbpf.SynthUnmapCall) {
	t.Helper()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, err := strconv.ParseUint(task.Name(), 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		key := uint64(pid)<<32 | tid
		if err := b.lo.objs.UnmapCalls.Put(&key, note); err != nil {
			t.Fatal(err)
		}
	}
}

// unmapsAt drains the rings and counts the unmap records of process
// pid that start at start, or, with start 0, all of them.
func unmapsAt(t *testing.T, b *BPF, pid int, start uint64) int {
	t.Helper()
	if _, _, err := b.DrainLive(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, lr := range b.TakeLive() {
		if !lr.Unmap || lr.Pid != uint32(pid) {
			continue
		}
		u, err := ParseUnmap(lr.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if start == 0 || u.Start == start {
			n++
		}
	}
	return n
}
