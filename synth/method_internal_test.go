package synth

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// auto tries procmaps before procquery only where the kernel isolates
// its page tables, which makes procquery's ioctl per VMA dear.
func TestProcOrder(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		meltdown string // the sysfs file's text; "" for no file
		want     MethodName
	}{
		{"Mitigation: PTI\n", MethodProcmaps},
		{"Not affected\n", MethodProcquery},
		{"Vulnerable\n", MethodProcquery},
		{"", MethodProcquery},
	} {
		path := filepath.Join(dir, "meltdown")
		os.Remove(path)
		if tc.meltdown != "" {
			if err := os.WriteFile(path, []byte(tc.meltdown), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got := procOrder(path)
		if len(got) != 2 || got[0] != tc.want || !slices.Contains(got, MethodProcmaps) || !slices.Contains(got, MethodProcquery) {
			t.Errorf("meltdown %q: order %v, want %s first and both", tc.meltdown, got, tc.want)
		}
	}
}
