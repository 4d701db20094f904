package bpfmethod

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
)

// The one line and the log's end of a refusal, from logs the verifiers
// of real kernels wrote: 6.18's classic log, and 7.3's, whose verifier
// follows the error with a summary of its own (testdata/verifier-7.3.4.log:
// the maple walk's program of c8efb90, refused on Debian's 7.3.4).
func TestProgramErrorVerdict(t *testing.T) {
	log73, err := os.ReadFile("testdata/verifier-7.3.4.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		log         []string
		line        string
		first, last string // of VerifierLog
	}{{
		name: "6.18",
		log: []string{"0: R1=ctx() R10=fp0", "; int dump_vma(struct bpf_iter__task_vma *ctx) @ synth.bpf.c:412",
			"0: (95) exit", "R0 !read_ok", "processed 1 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0", ""},
		line:  "load BPF program dump_vma: refused by the verifier: R0 !read_ok at insn 0: (95) exit (int dump_vma(struct bpf_iter__task_vma *ctx) @ synth.bpf.c:412)",
		first: "0: R1=ctx() R10=fp0",
		last:  "R0 !read_ok",
	}, {
		name: "7.3.4",
		log:  strings.Split(strings.TrimSuffix(string(log73), "\n"), "\n"),
		line: "load BPF program dump_vma: refused by the verifier: R1 pointer arithmetic on trusted_ptr_or_null_ prohibited, null-check it first " +
			"at insn 2729: (0f) r1 += r2 (n = bpf_d_path((struct path *)&v->vm_file->f_path, lf->path, @ walk.bpf.h:212)",
		last: "  Make sure that a NULL check precedes any arithmetic performed on the pointer.",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := &ProgramError{Program: "dump_vma", Err: &ebpf.VerifierError{Cause: syscall.EACCES, Log: tc.log}}
			if got := e.Error(); got != tc.line {
				t.Errorf("Error():\n%s\nwant\n%s", got, tc.line)
			}
			l := e.VerifierLog()
			if len(l) == 0 || len(l) > verifierTail+8 || tc.first != "" && l[0] != tc.first || l[len(l)-1] != tc.last {
				t.Errorf("VerifierLog():\n%s", strings.Join(l, "\n"))
			}
			for _, s := range l {
				if strings.HasPrefix(s, "processed ") || strings.Contains(s, "Causal path") {
					t.Errorf("VerifierLog() has %q", s)
				}
			}
		})
	}
	// Not the verifier's refusal: the error as it is, and no log.
	e := &ProgramError{Program: "probe", Err: ebpf.ErrNotSupported}
	if e.VerifierLog() != nil || !strings.HasPrefix(e.Error(), "load BPF program probe: ") {
		t.Errorf("%v: %q", e, e.VerifierLog())
	}
}
