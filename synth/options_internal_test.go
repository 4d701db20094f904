package synth

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// TestPermissionError checks that a method's refusal is
// os.ErrPermission, wrapped or not, and says what is missing.
func TestPermissionError(t *testing.T) {
	inner := &PermissionError{Op: "load BPF", Missing: []string{"CAP_BPF"}, Err: os.ErrPermission}
	for _, err := range []error{inner, fmt.Errorf("open: %w", inner)} {
		var pe *PermissionError
		if !errors.As(err, &pe) || !errors.Is(err, os.ErrPermission) {
			t.Errorf("%v: not a *PermissionError that is os.ErrPermission", err)
		}
	}
	if got, want := inner.Error(), "load BPF: missing CAP_BPF (run as root or grant them)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// resolve resolves the target: a thread names its process.
func TestResolve(t *testing.T) {
	o := Options{Target: Target{Tids: []int{os.Getpid()}}}
	r, err := resolve(&o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Pids) != 1 || r.Pids[0] != os.Getpid() || len(r.Target.Tids) != 1 {
		t.Errorf("resolve of %+v: pids %v, tids %v", o.Target, r.Pids, r.Target.Tids)
	}
}
