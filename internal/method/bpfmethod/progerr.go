package bpfmethod

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
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
// current kernels is often a register dump or empty. VerifierLog has
// more of the log's end. It is synth.ProgramError.
type ProgramError struct {
	Program string // the program's name in bpf/synth.bpf.c
	Err     error  // the load's error: a *ebpf.VerifierError when the verifier refused it
}

func (e *ProgramError) Error() string {
	var ve *ebpf.VerifierError
	if !errors.As(e.Err, &ve) {
		return fmt.Sprintf("load BPF program %s: %v", e.Program, e.Err)
	}
	return fmt.Sprintf("load BPF program %s: refused by the verifier: %s", e.Program, verdict(ve.Log))
}

func (e *ProgramError) Unwrap() error { return e.Err }

// verifierTail is how many lines up to the error VerifierLog returns.
const verifierTail = 12

// VerifierLog returns the end of the verifier's log, or nil if the
// verifier did not refuse the program: the lines up to the one that says
// why it stopped, and from 7.x the summary the verifier adds after it
// ("Verification failed:", its reason and suggestion), without the
// statistics the log ends with.
func (e *ProgramError) VerifierLog() []string {
	var ve *ebpf.VerifierError
	if !errors.As(e.Err, &ve) {
		return nil
	}
	log := trimStats(ve.Log)
	at, summary := errorLine(log)
	out := slices.Clone(log[max(0, at-verifierTail+1) : at+1])
	if summary < 0 {
		return out
	}
	// The summary, less its "At:" and "Causal path:" sections, which
	// repeat the lines above.
	skip := false
	for _, l := range log[summary:] {
		switch {
		case l == "At:" || l == "Causal path:":
			skip = true
		case l != "" && l[0] != ' ':
			skip = false
		}
		if !skip && l != "" {
			out = append(out, l)
		}
	}
	return out
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
	at, _ := errorLine(log)
	msg := strings.TrimSpace(log[at])
	var insn, src string
	for i := at - 1; i >= 0 && (insn == "" || src == ""); i-- {
		l := log[i]
		switch {
		case insn == "" && insnLine.MatchString(l):
			insn = l
		case insn != "" && strings.HasPrefix(l, "; "):
			src = strings.TrimPrefix(l, "; ")
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

// errorLine returns the index of the line of log that says why the
// verifier stopped, and that of the summary 7.x's verifier writes after
// it ("Verification failed: ..."), or -1. Without a summary the error is
// the last line.
func errorLine(log []string) (at, summary int) {
	summary = slices.IndexFunc(log, func(l string) bool { return strings.HasPrefix(l, "Verification failed:") })
	at = len(log) - 1
	if summary > 0 {
		at = summary - 1
		for at > 0 && log[at] == "" {
			at--
		}
	}
	return at, summary
}

// trimStats returns the log without its trailing statistics ("processed
// N insns ...", "verification time ...", "stack depth ...") and blank
// lines, each line without trailing blanks.
func trimStats(log []string) []string {
	out := make([]string, len(log))
	for i, l := range log {
		out[i] = strings.TrimRight(l, " \t")
	}
	for len(out) > 0 {
		l := out[len(out)-1]
		if l != "" && !strings.HasPrefix(l, "processed ") && !strings.HasPrefix(l, "verification time") &&
			!strings.HasPrefix(l, "stack depth") {
			break
		}
		out = out[:len(out)-1]
	}
	return out
}
