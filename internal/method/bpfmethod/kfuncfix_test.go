package bpfmethod

import "testing"

// The kernels with the open-coded task_vma iterator and without its mm
// lifecycle fix are told from the others by their release.
func TestTaskVMAIterSafe(t *testing.T) {
	for rel, want := range map[string]bool{
		"5.14.0-570.el9":       false, // a backported iterator: unknown
		"6.6.100":              false,
		"6.7.0":                false,
		"6.12.90":              false,
		"6.12.91":              true,
		"6.12.117+deb12-amd64": true,
		"6.14.2-300.fc42":      false,
		"6.18.32":              false,
		"6.18.33":              true,
		"6.18.44-fc-v769":      true,
		"6.19.5":               false,
		"7.0.9":                false,
		"7.0.10":               true,
		"7.1-rc1":              true,
		"7.2.0":                true,
	} {
		r, err := parseRelease(rel)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if got := taskVMAIterSafe(r); got != want {
			t.Errorf("%s (%+v): safe %v, want %v", rel, r, got, want)
		}
	}
}
