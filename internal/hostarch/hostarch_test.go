package hostarch

import (
	"os"
	"path/filepath"
	"testing"
)

// The host's C library is where LibDir says it is.
func TestLibDir(t *testing.T) {
	if Triplet() == "" {
		t.Fatal("no multiarch triplet for this architecture")
	}
	libc, _ := filepath.Glob(filepath.Join(LibDir(), "libc.so.*"))
	if len(libc) == 0 {
		if _, err := os.Stat("/etc/debian_version"); err == nil {
			t.Errorf("no libc.so.* in %s on a Debian host", LibDir())
		}
		t.Skipf("no libc.so.* in %s: not a multiarch distribution", LibDir())
	}
}
