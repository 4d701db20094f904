package perftest

import (
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testproc"
)

// MMAP2RE matches perf 6.1's text for an MMAP2 record, as perf script
// and perf report -D print it; its groups are pid, tid, start, length,
// pgoff, maj, min, ino, ino generation, r, w, x, s or p, and the file.
var MMAP2RE = regexp.MustCompile(`PERF_RECORD_MMAP2 (\d+)/(\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0) ([0-9a-f]+):([0-9a-f]+) (\d+) (\d+)\]: ([r-])([w-])([x-])([sp]) (.*)$`)

// Maps returns, for process pid, the mappings perf printed, in the form
// of ProcMaps; "//anon" reads as an anonymous mapping.
func Maps(t testing.TB, out string, pid int) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(out, "\n") {
		m := MMAP2RE.FindStringSubmatch(line)
		if m == nil {
			m = buildIDForm(t, line, pid)
		}
		if m == nil || m[1] != strconv.Itoa(pid) {
			continue
		}
		start, _ := strconv.ParseUint(m[3], 16, 64)
		size, _ := strconv.ParseUint(m[4], 16, 64)
		pgoff, _ := strconv.ParseUint(strings.TrimPrefix(m[5], "0x"), 16, 64)
		maj, _ := strconv.ParseUint(m[6], 16, 32)
		min, _ := strconv.ParseUint(m[7], 16, 32)
		path := m[14]
		if path == "//anon" {
			path = ""
		}
		got = append(got, mapLine(procfs.Mapping{
			Start: start, End: start + size, Pgoff: pgoff, Maj: uint32(maj), Min: uint32(min),
			Ino: mustUint(m[8]), Prot: perm(m[10], 1) | perm(m[11], 2) | perm(m[12], 4),
			Shared: m[13] == "s", Path: path,
		}))
	}
	return got
}

// perfMmap2BuildIDRE matches the build-ID form of an MMAP2 record.
var perfMmap2BuildIDRE = regexp.MustCompile(`PERF_RECORD_MMAP2 (\d+)/(\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0) <([0-9a-f]+)>\]: ([r-])([w-])([x-])([sp]) (.*)$`)

// buildIDForm reads an MMAP2 line of the build-ID form of process pid
// into the groups of MMAP2RE. The build ID must be the file's (t
// fails if not); maj, min and ino, which the record does not carry, are
// then the file's too, from stat(2).
func buildIDForm(t testing.TB, line string, pid int) []string {
	t.Helper()
	b := perfMmap2BuildIDRE.FindStringSubmatch(line)
	if b == nil || b[1] != strconv.Itoa(pid) {
		return nil
	}
	path := b[11]
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("%s: %v", line, err)
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	id, err := elfnote.BuildID(f, fi.Size())
	if err != nil || hex.EncodeToString(id) != b[6] {
		t.Errorf("%s: the file's build ID is %x (%v)", line, id, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return []string{b[0], b[1], b[2], b[3], b[4], b[5],
		strconv.FormatUint(uint64(unix.Major(st.Dev)), 16), strconv.FormatUint(uint64(unix.Minor(st.Dev)), 16),
		strconv.FormatUint(st.Ino, 10), "0", b[7], b[8], b[9], b[10], path}
}

// BuildIDLines returns perf's MMAP2 lines of the build-ID form of pid.
func BuildIDLines(out string, pid int) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if m := perfMmap2BuildIDRE.FindStringSubmatch(l); m != nil && m[1] == fmt.Sprint(pid) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func perm(s string, bit uint32) uint32 {
	if s == "-" {
		return 0
	}
	return bit
}

func mustUint(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }

func mapLine(m procfs.Mapping) string {
	return fmt.Sprintf("%x-%x prot=%d shared=%v %x %x:%x %d %q",
		m.Start, m.End, m.Prot, m.Shared, m.Pgoff, m.Maj, m.Min, m.Ino, m.Path)
}

// ProcMaps returns what /proc/PID/maps says, one line a mapping:
// executable mappings only unless data is set.
func ProcMaps(t testing.TB, pid int, data bool) []string {
	t.Helper()
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range maps {
		if data || m.Prot&4 != 0 {
			want = append(want, mapLine(m))
		}
	}
	return want
}

// CheckOutput checks what perf printed (out) for the test process p
// against /proc: every mapping once, and its threads' COMM records.
func CheckOutput(t testing.TB, what, out string, p *testproc.Proc, data bool) {
	t.Helper()
	if diff := diffLines(ProcMaps(t, p.Pid, data), Maps(t, out, p.Pid)); len(diff) > 0 {
		t.Errorf("%s: mappings of pid %d differ from /proc:\n%s", what, p.Pid, strings.Join(diff, "\n"))
	}
	comms, err := p.Comms()
	if err != nil {
		t.Fatal(err)
	}
	for tid, comm := range comms {
		rec := "PERF_RECORD_COMM: " + comm + ":" + strconv.Itoa(p.Pid) + "/" + strconv.Itoa(tid)
		if !strings.Contains(out, rec) {
			t.Errorf("%s: no %q", what, rec)
		}
	}
}

// diffLines reports lines missing from got, extra in got, or doubled.
func diffLines(want, got []string) []string {
	var diff []string
	n := map[string]int{}
	for _, l := range got {
		if n[l]++; n[l] == 2 {
			diff = append(diff, "twice: "+l)
		}
	}
	w := map[string]bool{}
	for _, l := range want {
		w[l] = true
		if n[l] == 0 {
			diff = append(diff, "missing: "+l)
		}
	}
	for _, l := range got {
		if !w[l] {
			diff = append(diff, "extra: "+l)
		}
	}
	if len(diff) > 20 {
		diff = append(diff[:20], fmt.Sprintf("... %d more", len(diff)-20))
	}
	return diff
}
