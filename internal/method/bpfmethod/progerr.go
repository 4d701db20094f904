package bpfmethod

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/cilium/ebpf"
)

// ProgramError is a program of bpf/synth.bpf.c that the kernel refused
// to load: it lacks a helper, kfunc, iterator or field the program
// needs, or its verifier could not prove the program safe.
//
// Its one line names the verifier's verdict where there is one: the
// error, the instruction and the source line it was checking, taken
// from the end of the log, where the verifier says why it stopped.
// cilium/ebpf's own message keeps the last line or two, which on
// current kernels is often a register dump or empty.
type ProgramError struct {
	Program string
	Err     error // a *ebpf.VerifierError when the verifier refused it
}

func (e *ProgramError) Error() string {
	var ve *ebpf.VerifierError
	if !errors.As(e.Err, &ve) {
		return fmt.Sprintf("load BPF program %s: %v", e.Program, e.Err)
	}
	return fmt.Sprintf("load BPF program %s: refused by the verifier: %s", e.Program, verdict(ve.Log))
}

func (e *ProgramError) Unwrap() error { return e.Err }

// verifierTail is how many of the log's last lines VerifierLog returns.
const verifierTail = 12

// VerifierLog returns the last lines of the verifier's log, without the
// statistics it ends with, or nil if the verifier did not refuse the
// program.
func (e *ProgramError) VerifierLog() []string {
	var ve *ebpf.VerifierError
	if !errors.As(e.Err, &ve) {
		return nil
	}
	log := trimStats(ve.Log)
	return log[max(0, len(log)-verifierTail):]
}

// insnLine is a line of the log that shows an instruction: "123: (bf) r1 = r6".
var insnLine = regexp.MustCompile(`^[0-9]+: \(`)

// verdict renders the end of a verifier log as one line: the error,
// then the instruction it was checking and that instruction's source
// line (the "; " lines of the program's line info), where the log has
// them.
func verdict(log []string) string {
	log = trimStats(log)
	if len(log) == 0 {
		return "no log"
	}
	msg := log[len(log)-1]
	var insn, src string
	for i := len(log) - 2; i >= 0 && (insn == "" || src == ""); i-- {
		l := log[i]
		switch {
		case insn == "" && insnLine.MatchString(l):
			insn = l
		case insn != "" && strings.HasPrefix(l, "; "):
			src = strings.TrimSpace(strings.TrimPrefix(l, "; "))
		}
	}
	if insn != "" {
		msg += " at insn " + insn
	}
	if src != "" {
		msg += " (" + src + ")"
	}
	return msg
}

// trimStats returns the log without its trailing statistics ("processed
// N insns ...", "verification time ...", "stack depth ...") and blank
// lines, each line trimmed.
func trimStats(log []string) []string {
	out := make([]string, 0, len(log))
	for _, l := range log {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	for len(out) > 0 {
		l := out[len(out)-1]
		if !strings.HasPrefix(l, "processed ") && !strings.HasPrefix(l, "verification time") &&
			!strings.HasPrefix(l, "stack depth") {
			break
		}
		out = out[:len(out)-1]
	}
	return out
}
