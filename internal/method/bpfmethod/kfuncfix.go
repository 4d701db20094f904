package bpfmethod

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The maple walk looks up a file's path through the open-coded task_vma
// iterator (bpf_iter_task_vma_new, 6.7). Until "bpf: fix mm lifecycle in
// open-coded task_vma iterator" (d8e27d2d22b6, CVE-2026-53085) that
// kfunc read task->mm without taking a reference, and a process exiting
// meanwhile could leave it on a freed mm_struct. The fix is in 7.1 and
// in the stable kernels 6.12.91, 6.18.33 and 7.0.10; the walk calls the
// kfunc once per file of every process, exiting ones included, so on a
// kernel without the fix the walk does not run.

// release is a kernel's version, from uname's release string.
type release struct{ major, minor, patch int }

func parseRelease(s string) (release, error) {
	var r release
	f := strings.FieldsFunc(s, func(c rune) bool { return c == '.' || c == '-' || c == '+' || c == '_' })
	var err error
	for i, p := range []*int{&r.major, &r.minor, &r.patch} {
		if i >= len(f) {
			break
		}
		if *p, err = strconv.Atoi(f[i]); err != nil {
			if i == 2 {
				*p, err = 0, nil // "6.19-rc1": no patch level
				break
			}
			return release{}, fmt.Errorf("kernel release %q: %w", s, err)
		}
	}
	return r, nil
}

func (r release) before(major, minor, patch int) bool {
	return r.major != major && r.major < major ||
		r.major == major && (r.minor < minor || r.minor == minor && r.patch < patch)
}

// taskVMAIterSafe reports whether kernel release r, whose BPF has the
// open-coded task_vma iterator (the probe checked), has its mm lifecycle
// fix.
func taskVMAIterSafe(r release) bool {
	switch {
	case r.before(6, 7, 0):
		// Upstream has no such iterator; one that has it all the same
		// (a vendor backport) has nothing to say it has the fix.
		return false
	case r.major == 6 && r.minor == 12:
		return !r.before(6, 12, 91)
	case r.major == 6 && r.minor == 18:
		return !r.before(6, 18, 33)
	case r.major == 7 && r.minor == 0:
		return !r.before(7, 0, 10)
	}
	return !r.before(7, 1, 0)
}

// checkTaskVMAIter says why the maple walk must not run on this kernel,
// or nil.
func checkTaskVMAIter() error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	r, err := parseRelease(rel)
	if err != nil {
		return err
	}
	if !taskVMAIterSafe(r) {
		return &UnsafeIterError{Release: rel}
	}
	return nil
}

// UnsafeIterError is why the maple walk does not run on a kernel whose
// open-coded task_vma iterator can touch a freed mm: a kernel bug, not a
// missing feature.
type UnsafeIterError struct {
	Release string // the kernel's, as uname gives it
}

func (e *UnsafeIterError) Error() string {
	return fmt.Sprintf("Linux %s lacks the mm lifecycle fix of the open-coded task_vma iterator "+
		"the walk calls (CVE-2026-53085; fixed in 6.12.91, 6.18.33, 7.0.10, 7.1)", e.Release)
}
