package procfs

import (
	"slices"
	"testing"
)

func TestCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"0":         {0},
		"0-3":       {0, 1, 2, 3},
		"0-1,4,6-7": {0, 1, 4, 6, 7},
	} {
		got, err := CPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("CPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "1-", "-1", "0,,1", "0-99999999"} {
		if got, err := CPUList(bad); err == nil {
			t.Errorf("CPUList(%q) = %v, want an error", bad, got)
		}
	}
}
