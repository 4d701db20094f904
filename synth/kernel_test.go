package synth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// needMaple skips t where this kernel cannot prove the maple walk
// (bpf/maple.bpf.h); from 6.14 on every kernel can, and there a kernel
// that cannot fails t under SYNTH_REQUIRE, unless it is one whose
// open-coded task_vma iterator is unsafe (Debian's 6.18.15, say), where
// refusing the walk is what synth must do.
func needMaple(t *testing.T) {
	t.Helper()
	walk, why := autoWalk(t)
	if unsafe := (*bpfmethod.UnsafeIterError)(nil); errors.As(why, &unsafe) {
		t.Skipf("no maple walk on this kernel, rightly: %v", why)
	}
	testenv.Kernel(t, walk == synth.WalkMaple, "6.14", fmt.Sprint(why))
}

// autoWalk returns the walk the BPF method chooses on this kernel, and
// why it is not the maple walk.
func autoWalk(t *testing.T) (synth.Walk, error) {
	t.Helper()
	testenv.Root(t)
	b, err := synth.NewBPF(synth.Options{NoKernel: true, NoBuildID: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	return b.Walk()
}

// haveProcquery reports whether this kernel has the PROCMAP_QUERY ioctl;
// from 6.11 on every kernel has it, and there a kernel without fails t
// under SYNTH_REQUIRE.
func haveProcquery(t *testing.T) bool {
	t.Helper()
	m, err := synth.OpenMethod(synth.MethodProcquery, synth.MethodOptions{Threads: 1})
	if err == nil {
		m.Close()
		return true
	}
	if !errors.Is(err, synth.ErrNoProcquery) {
		t.Fatal(err)
	}
	return testenv.Feature(t, false, "6.11", "no PROCMAP_QUERY: procquery is not checked")
}

// needProcquery skips t where this kernel has no PROCMAP_QUERY.
func needProcquery(t *testing.T) {
	t.Helper()
	if !haveProcquery(t) {
		t.SkipNow()
	}
}

// Where the kernel cannot run one of the programs, the dump stays exact
// and says why: without the maple walk's program the BPF method reads
// with the task_vma iterator; without the iterator's, --method bpf fails
// naming it and auto falls back to a /proc method. RefuseProgram has the
// kernel's verifier refuse the program, standing in for a kernel that
// lacks the helper or iterator.
func TestKernelFallbacks(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, everything)
	opts := synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Data: true, NoKernel: true}
	t.Run("dump_tasks", func(t *testing.T) {
		walk, _ := autoWalk(t)
		defer synth.RefuseProgram("dump_tasks")()
		d := runDump(t, opts)
		if d.stats.Walk != synth.WalkIter || d.stats.WalkFallback == nil {
			t.Errorf("walk %q (%v), want iter and why", d.stats.Walk, d.stats.WalkFallback)
		}
		// Where the kernel runs the maple walk, the reason is its
		// verifier's own refusal, with the end of its log.
		var pe *synth.ProgramError
		if walk == synth.WalkMaple && (!errors.As(d.stats.WalkFallback, &pe) || pe.Program != "dump_tasks" ||
			len(pe.VerifierLog()) == 0 || !strings.Contains(pe.Error(), "R0 !read_ok")) {
			t.Errorf("walk fallback %v, want the verifier's refusal of dump_tasks with its log", d.stats.WalkFallback)
		}
		checkProc(t, p, d, true)
		opts := opts
		opts.Walk = synth.WalkMaple
		if m, err := synth.NewBPF(opts); err == nil {
			m.Close()
			t.Error("--walk maple loaded without the maple walk's program")
		}
	})
	t.Run("dump_vma", func(t *testing.T) {
		defer synth.RefuseProgram("dump_vma")()
		opts := opts
		opts.NoBuildID = true
		// A kernel without iter/task_vma has no maple walk either: the
		// iterator walk, which loads dump_vma at once, stands for it.
		opts.Walk = synth.WalkIter
		if m, err := synth.OpenMethod(synth.MethodBPF, synth.MethodOptions{Options: opts}); err == nil || !strings.Contains(err.Error(), "dump_vma") {
			if m != nil {
				m.Close()
			}
			t.Fatalf("bpf without dump_vma: %v, want its load error", err)
		}
		var why []error
		m, err := synth.OpenMethod(synth.MethodAuto, synth.MethodOptions{Options: opts, Threads: 2,
			Fallback: func(method synth.MethodName, err error) { why = append(why, fmt.Errorf("%s: %w", method, err)) }})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if len(why) == 0 || !strings.Contains(why[0].Error(), "dump_vma") {
			t.Errorf("auto says %v, want why bpf was not used", why)
		}
		d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
		d.stats, err = m.Dump(context.Background(), func(rec []byte) error { return d.add(rec, synth.DefaultSampleType) })
		if err != nil {
			t.Fatal(err)
		}
		if d.stats.Method == synth.MethodBPF {
			t.Errorf("auto chose bpf")
		}
		// The dump is without build IDs (opts.NoBuildID).
		want, ok := tryProcKeys(p.Pid, false)
		if diff := sameMaps(want, d.of(p.Pid)); !ok || len(diff) > 0 {
			t.Errorf("%s: pid %d differs from /proc:\n%s", d.stats.Method, p.Pid, strings.Join(diff, "\n"))
		}
	})
}
