package testenv

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Required reports whether missing requirements fail tests.
func Required() bool { return os.Getenv("SYNTH_REQUIRE") == "1" }

// Need skips or fails t, by Required, when ok is false.
func Need(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if Required() {
		t.Fatalf("SYNTH_REQUIRE=1 and %s", what)
	}
	t.Skip(what)
}

// ExamplesNeedRoot is for the TestMain of a package whose runnable
// examples load BPF: as a user without root, go test skips them (as
// -skip '^Example' would) and says so, unless Required, where they run
// and fail. An example cannot skip itself.
func ExamplesNeedRoot() {
	if os.Geteuid() == 0 || Required() {
		return
	}
	if f := flag.Lookup("test.skip"); f != nil && f.Value.String() == "" {
		_ = f.Value.Set("^Example")
		fmt.Fprintln(os.Stderr, "testenv: the examples need root: skipped")
	}
}

// Root requires that the test runs as root.
func Root(t testing.TB) {
	t.Helper()
	Need(t, os.Geteuid() == 0, "test needs root")
}

// Perf returns the path of the perf tool, or skips or fails t.
func Perf(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("perf")
	Need(t, err == nil, "perf is not installed")
	return p
}

// KernelAtLeast reports whether the running kernel is major.minor or
// later, by uname(2)'s release.
func KernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// Feature returns ok, whether the kernel has a feature that kernels have
// from version since on. Where it lacks it, a kernel of that version or
// later fails t under SYNTH_REQUIRE; an older one is logged with why.
func Feature(t testing.TB, ok bool, since string, why string) bool {
	t.Helper()
	if ok {
		return true
	}
	var ma, mi int
	if _, err := fmt.Sscanf(since, "%d.%d", &ma, &mi); err == nil && KernelAtLeast(ma, mi) && Required() {
		t.Fatalf("SYNTH_REQUIRE=1 and this kernel (%s or later) lacks it: %s", since, why)
	}
	t.Logf("this kernel lacks it (needs %s, or a backport): %s", since, why)
	return false
}

// Kernel skips t where the kernel lacks a feature of a later kernel (see
// Feature).
func Kernel(t testing.TB, ok bool, since string, why string) {
	t.Helper()
	if !Feature(t, ok, since, why) {
		t.SkipNow()
	}
}

// Option skips t, never failing it, where the kernel was built without
// what the test needs (ok false): a build option is not a missing
// privilege or tool, and SYNTH_REQUIRE does not turn it into a failure.
func Option(t testing.TB, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Skipf("this kernel was built without %s: not checked here", what)
	}
}

// Arch skips t, never failing it, unless synth runs on the architecture
// goarch (runtime.GOARCH): what the test checks exists only there (x86-64's
// [vsyscall] page, i386 executables). SYNTH_REQUIRE does not turn it into
// a failure.
func Arch(t testing.TB, goarch string, what string) {
	t.Helper()
	if runtime.GOARCH != goarch {
		t.Skipf("%s: only on %s, this is %s", what, goarch, runtime.GOARCH)
	}
}

// Testdata returns the path of elem under the module's testdata
// directory, found from the working directory up, where go test runs a
// package's tests: the path the test binary was compiled at may not be
// there (make vmtest runs the binaries from a copy of the checkout).
func Testdata(t testing.TB, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(append([]string{dir, "testdata"}, elem...)...)
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("no go.mod above the working directory: the tests run in the checkout")
		}
		dir = up
	}
}
