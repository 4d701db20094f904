package main

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// hexBuildID is the build ID of the ELF file at path, in hex.
func hexBuildID(t *testing.T, path string) string {
	t.Helper()
	return hex.EncodeToString(fileBuildID(t, path))
}

// reportIn is perf report --sort dso,sym with HOME home: the share of
// each "dso sym".
func reportIn(t *testing.T, perf, home, file string) (map[string]float64, string) {
	t.Helper()
	cmd := exec.Command(perf, "report", "--stdio", "--sort", "dso,sym", "-i", file)
	cmd.Env = append(os.Environ(), "HOME="+home, "PERF_PAGER=cat")
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("%s: exit %d: %s", cmd, r.code, r.stderr)
	}
	shares := map[string]float64{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if m := reportLineRE.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			shares[m[2]+" "+m[4]] += v
		}
	}
	return shares, r.stdout
}

// synth record puts the files with samples in perf's build-ID cache
// (and -N does not): once libspin.so is rebuilt at the same path, perf
// report still names lib_spin from the cache, as for a perf recording;
// perf buildid-cache lists the files.
func TestRecordBuildIDCache(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	spin := buildSpin(t)
	lib := filepath.Join(filepath.Dir(spin), "libspin.so")
	oldID := hexBuildID(t, lib)
	dir := t.TempDir()
	home, homeN := filepath.Join(dir, "home"), filepath.Join(dir, "home-N")
	cached, uncached := filepath.Join(dir, "cached.data"), filepath.Join(dir, "uncached.data")
	for _, rec := range []struct {
		home, file string
		flags      []string
	}{{home, cached, nil}, {homeN, uncached, []string{"-N"}}} {
		if err := os.Mkdir(rec.home, 0o755); err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{"record", "-F", "999", "-o", rec.file}, rec.flags...), "--", "timeout", "1", spin)
		cmd := exec.Command(synthBin, args...)
		cmd.Env = append(os.Environ(), "HOME="+rec.home)
		r := runCmd(t, cmd)
		checkRecordExit(t, r, 124)
		if strings.Contains(r.stderr, "build-ID cache") {
			t.Errorf("synth record %v: %s", rec.flags, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(homeN, ".debug")); err == nil {
		t.Error("synth record -N made a build-ID cache")
	}
	sid := func(id string) string { return id[:2] + "/" + id[2:] }
	if to, err := os.Readlink(filepath.Join(home, ".debug", ".build-id", sid(oldID))); err != nil || to != "../.."+lib+"/"+oldID {
		t.Errorf(".build-id/%s -> %q, %v; want ../..%s/%s", sid(oldID), to, err, lib, oldID)
	}

	// perf lists only the entries whose file still has the build ID:
	// before the rebuild.
	ls := exec.Command(perf, "buildid-cache", "-l")
	ls.Env = append(os.Environ(), "HOME="+home)
	r := runCmd(t, ls)
	t.Logf("perf buildid-cache -l:\n%s", r.stdout)
	for _, want := range []string{oldID + " " + lib, hexBuildID(t, spin) + " " + spin} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("perf buildid-cache -l does not list %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}

	// The same library, other code: a new build ID at the same path.
	src := filepath.Join(dir, "libspin2.c")
	code := "#include <stdint.h>\nint other_fn(int a) { return a * 7; }\nuint64_t lib_spin(uint64_t n) { return n + other_fn(3); }\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O1", "-fPIC", "-shared", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if newID := hexBuildID(t, lib); newID == oldID {
		t.Fatalf("the rebuilt libspin.so has the build ID %s still", newID)
	}

	got, out := reportIn(t, perf, home, cached)
	t.Logf("perf report of synth's recording, from the cache:\n%s", head(out, 14))
	if got["libspin.so lib_spin"] < 5 {
		t.Errorf("perf report with the cache: libspin.so lib_spin has %.2f%%, want >= 5: %v", got["libspin.so lib_spin"], got)
	}
	got, out = reportIn(t, perf, homeN, uncached)
	t.Logf("perf report of synth record -N's:\n%s", head(out, 14))
	if got["libspin.so lib_spin"] > 0 {
		t.Errorf("perf report without the cache names lib_spin (%.2f%%) in the rebuilt library", got["libspin.so lib_spin"])
	}

}

// head is the first n lines of s that are not comments.
func head(s string, n int) string {
	var b bytes.Buffer
	for line := range strings.Lines(s) {
		if n == 0 {
			break
		}
		if !strings.HasPrefix(line, "#") && strings.TrimSpace(line) != "" {
			b.WriteString(line)
			n--
		}
	}
	return b.String()
}

// synth inject fills the build-ID cache too, with the files its dump
// gave build IDs (the processes that existed before perf record), and
// -N leaves it alone.
func TestInjectBuildIDCache(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	spin := buildSpin(t)
	pid := strconv.Itoa(startSpin(t, spin))
	lib := filepath.Join(filepath.Dir(spin), "libspin.so")
	rec := []string{"-p", pid, "--synth=no", "-k", "CLOCK_MONOTONIC", "-F", "999"}
	for _, flags := range [][]string{nil, {"-N"}} {
		home := t.TempDir()
		t.Setenv("HOME", home) // synth inject's
		out := filepath.Join(t.TempDir(), "injected.data")
		r := injectPipe(t, perf, rec, append([]string{"-o", out}, flags...), nil)
		if r.code != 0 || strings.Contains(r.stderr, "build-ID cache") {
			t.Fatalf("synth inject %v: exit %d: %s", flags, r.code, r.stderr)
		}
		for _, file := range []string{spin, lib} {
			id := hexBuildID(t, file)
			link := filepath.Join(home, ".debug", ".build-id", id[:2], id[2:])
			to, err := os.Readlink(link)
			switch {
			case flags != nil && err == nil:
				t.Errorf("synth inject -N cached %s", file)
			case flags == nil && (err != nil || to != "../.."+file+"/"+id):
				t.Errorf("synth inject: %s -> %q, %v; want ../..%s/%s", link, to, err, file, id)
			}
			if flags == nil && hexBuildID(t, filepath.Join(home, ".debug", file[1:], id, "elf")) != id {
				t.Errorf("synth inject: the cached %s has another build ID", file)
			}
		}
	}
}
