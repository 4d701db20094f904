package config

import (
	"strings"
	"testing"
)

// Each walk and method parses from its String, "" is auto, and an
// unknown name is refused with the names it could have been.
func TestParse(t *testing.T) {
	for _, w := range []Walk{WalkAuto, WalkMaple, WalkIter} {
		if got, err := ParseWalk(w.String()); got != w || err != nil {
			t.Errorf("ParseWalk(%q) = %q, %v", w, got, err)
		}
	}
	if got, err := ParseWalk(""); got != WalkAuto || err != nil {
		t.Errorf(`ParseWalk("") = %q, %v; want auto`, got, err)
	}
	if _, err := ParseWalk("sideways"); err == nil || !strings.Contains(err.Error(), `unknown walk "sideways" (want auto, maple or iter)`) {
		t.Errorf("ParseWalk(sideways): %v", err)
	}
	for _, m := range []MethodName{MethodAuto, MethodBPF, MethodProcmaps, MethodProcquery} {
		if got, err := ParseMethod(m.String()); got != m || err != nil {
			t.Errorf("ParseMethod(%q) = %q, %v", m, got, err)
		}
	}
	if got, err := ParseMethod(""); got != MethodAuto || err != nil {
		t.Errorf(`ParseMethod("") = %q, %v; want auto`, got, err)
	}
	if _, err := ParseMethod("bogus"); err == nil || !strings.Contains(err.Error(), `unknown method "bogus" (want auto, bpf, procmaps or procquery)`) {
		t.Errorf("ParseMethod(bogus): %v", err)
	}
}

// Check refuses what no method can honour, and nothing else.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		o   Options
		bad string // in the error; "" for none
	}{
		{Options{}, ""},
		{Options{Walk: WalkIter, RingPages: MinRingPages}, ""},
		{Options{Walk: "sideways"}, "unknown walk"},
		{Options{RingPages: MinRingPages / 2}, "ring size"},
		{Options{RingPages: MinRingPages + 1}, "ring size"},
		{Options{Target: Target{Pids: []int{1}, UID: "root"}}, "a target sets one"},
	} {
		err := tc.o.Check()
		if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%+v: Check() = %v, want %q", tc.o, err, tc.bad)
		}
	}
}

// A method keeps what it loaded with, and takes the rest anew.
func TestWithLoaded(t *testing.T) {
	loaded := Resolved{Options: Options{NoKernel: true, BuildIDTimeout: 1, NoLive: true, Walk: WalkIter, RingPages: 32, KernelCache: "/k"}}
	next := Resolved{Options: Options{Data: true, Walk: WalkMaple}, Pids: []int{1}}
	got := next.WithLoaded(loaded)
	if !got.NoKernel || got.BuildIDTimeout != 1 || !got.NoLive || got.Walk != WalkIter || got.RingPages != 32 || got.KernelCache != "/k" {
		t.Errorf("WithLoaded took %+v, want the loaded options", got.Options)
	}
	if !got.Data || len(got.Pids) != 1 {
		t.Errorf("WithLoaded lost the next dump's: %+v", got)
	}
}
