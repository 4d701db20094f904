package synth

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/synth-dev/synth/internal/assemble"
)

// TestOptionConstants checks that the package's defaults and names are
// those the methods apply: the package declares them so that its
// documentation shows values, not internal names.
func TestOptionConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"DefaultSampleType", uint64(DefaultSampleType), uint64(assemble.DefaultSampleType)},
		{"DefaultRingPages", DefaultRingPages, assemble.DefaultRingPages},
		{"MinRingPages", MinRingPages, assemble.MinRingPages},
		{"DefaultBuildIDTimeout", DefaultBuildIDTimeout, assemble.DefaultBuildIDTimeout},
		{"DefaultProcMapTimeout", DefaultProcMapTimeout, assemble.DefaultProcMapTimeout},
		{"WalkAuto", WalkAuto, assemble.WalkAuto},
		{"WalkMaple", WalkMaple, assemble.WalkMaple},
		{"WalkIter", WalkIter, assemble.WalkIter},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, the methods use %v", c.name, c.got, c.want)
		}
	}
}

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

// internal carries every field of Options but the target to the field of
// the same name, and that one only, and open adds the target's processes
// and threads: a field added to one and not the other, left out, or
// copied into another, fails here.
func TestOptionsInternal(t *testing.T) {
	typ := reflect.TypeFor[Options]()
	if n := reflect.TypeFor[assemble.Options]().NumField(); n != typ.NumField()+1 {
		t.Errorf("assemble.Options has %d fields, Options %d and a target", n, typ.NumField())
	}
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if name == "Target" {
			continue
		}
		var o Options
		f := reflect.ValueOf(&o).Elem().Field(i)
		switch {
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.String:
			f.SetString("x")
		case f.CanInt():
			f.SetInt(7)
		case f.CanUint():
			f.SetUint(7)
		default:
			t.Fatalf("Options.%s: kind %v not filled here", name, f.Kind())
		}
		a := reflect.ValueOf(o.internal())
		for j := range a.NumField() {
			got, aName := a.Field(j), a.Type().Field(j).Name
			switch {
			case aName == name && !reflect.DeepEqual(got.Interface(), f.Interface()):
				t.Errorf("internal copies Options.%s = %v as %v", name, f, got)
			case aName != name && !got.IsZero():
				t.Errorf("internal copies Options.%s into assemble.Options.%s", name, aName)
			}
		}
		if !a.FieldByName(name).IsValid() {
			t.Errorf("assemble.Options has no field %s", name)
		}
	}

	// open resolves the target: a thread names its process.
	o := Options{Target: Target{Tids: []int{os.Getpid()}}}
	r, err := o.open()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Pids) != 1 || r.Pids[0] != os.Getpid() || len(r.Tids) != 1 {
		t.Errorf("open of %+v: pids %v, tids %v", o.Target, r.Pids, r.Tids)
	}
}
