package procfs

import (
	"errors"
	"strings"
	"testing"
)

// perf takes cgroups from a v1 hierarchy with perf_event if one is
// mounted, else from cgroup2; mount points are unescaped.
func TestParseCgroupFS(t *testing.T) {
	v2 := "35 24 0:30 / /sys/fs/cgroup/uni\\040fied rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
	v1 := "36 24 0:31 / /sys/fs/cgroup/perf_event rw - cgroup cgroup rw,perf_event\n"
	cpu := "37 24 0:32 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
	for _, tc := range []struct {
		in   string
		want CgroupFS
		err  error
	}{
		{v2 + cpu, CgroupFS{Mount: "/sys/fs/cgroup/uni fied"}, nil},
		{v2 + v1, CgroupFS{Mount: "/sys/fs/cgroup/perf_event", V1: true}, nil},
		{cpu, CgroupFS{}, ErrNoCgroupFS},
	} {
		got, err := parseCgroupFS(strings.NewReader(tc.in))
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%q: %+v, %v; want %+v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
