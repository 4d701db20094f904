package perfdata

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gnuBuildID reads the NT_GNU_BUILD_ID note of an ELF file.
func gnuBuildID(t *testing.T, path string) []byte {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		t.Skipf("%s has no build id", path)
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		t.Fatalf("build-id note of %s: %v", path, err)
	}
	return b[16:] // namesz, descsz, type, "GNU\0"
}

// writeModes writes the test records, and build IDs, in file and in pipe
// mode, and returns the file name and the pipe bytes.
func writeModes(t *testing.T, ids []BuildIDEvent) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pipe bytes.Buffer
	for _, out := range []interface{ Write([]byte) (int, error) }{f, &pipe} {
		w, err := NewWriter(out, WriterOptions{
			Attrs:    []EventAttr{{Attr: testAttr(), Name: "dummy:u"}},
			Features: testFeatures("synth", "dump"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteBuildIDs(ids); err != nil {
			t.Fatal(err)
		}
		for _, rec := range testRecords() {
			if err := w.WriteRecord(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return path, pipe.Bytes()
}

func TestPerfReads(t *testing.T) {
	id := gnuBuildID(t, "/bin/true")
	path, pipe := writeModes(t, []BuildIDEvent{{Misc: MiscUser, Pid: -1, BuildID: id, Filename: "/bin/true"}})
	for _, mode := range []struct {
		name  string
		in    []byte
		input string
	}{{"file", nil, path}, {"pipe", pipe, "-"}} {
		t.Run(mode.name, func(t *testing.T) {
			out := perfRun(t, mode.in, "script", "--show-mmap-events", "--show-task-events", "-i", mode.input)
			for _, want := range []string{
				"PERF_RECORD_MMAP -1/0: [0xffffffff81000000(0x100000) @ 0xffffffff81000000]: x [kernel.kallsyms]_text",
				"PERF_RECORD_COMM: main:100/100",
				"PERF_RECORD_FORK(100:101):(100:100)",
				"PERF_RECORD_COMM: worker:100/101",
				"PERF_RECORD_MMAP2 100/100: [0x400000(0x1000) @ 0 08:01 12 0]: r-xp /usr/bin/main",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("perf script: no %q in\n%s", want, out)
				}
			}
			dump := perfRun(t, mode.in, "report", "-D", "-i", mode.input)
			if n := strings.Count(dump, ": PERF_RECORD_"); n < len(testRecords()) {
				t.Errorf("perf report -D shows %d records, want >= %d", n, len(testRecords()))
			}
			if mode.name == "pipe" {
				pipeBuildIDs(t, dump, id)
				return
			}
			ids := perfRun(t, mode.in, "buildid-list", "-i", mode.input)
			if want := hex.EncodeToString(id) + " /bin/true"; !strings.Contains(ids, want) {
				t.Errorf("perf buildid-list: no %q in %q", want, ids)
			}
		})
	}
	hdr := perfRun(t, nil, "report", "--header-only", "-i", path)
	for _, want := range []string{"# hostname : " + testHost, "# os release : ", "# arch : ",
		"# nrcpus online : ", "# cmdline : synth dump", "# event : name = dummy:u"} {
		if !strings.Contains(hdr, want) {
			t.Errorf("perf report --header-only: no %q in\n%s", want, hdr)
		}
	}
}

// pipeBuildIDs checks that perf read the PERF_RECORD_HEADER_BUILD_ID
// records of a pipe. perf buildid-list lists a pipe's DSOs only when
// samples hit them, so perf report -D is the oracle here.
func pipeBuildIDs(t *testing.T, dump string, id []byte) {
	t.Helper()
	if !regexp.MustCompile(`BUILD_ID events: +1 `).MatchString(dump) {
		t.Errorf("perf report -D counts no BUILD_ID event:\n%s", dump)
	}
	// The raw dump of the record holds the id's first bytes.
	if !strings.Contains(dump, fmt.Sprintf("0010:  % x", id[4:12])) {
		t.Errorf("perf report -D shows no record with build id %x", id)
	}
}

// TestPerfReadsHostSections has perf print every host section of
// testFeatures, as encoded by hostfeat.go.
func TestPerfReadsHostSections(t *testing.T) {
	path, _ := writeModes(t, nil)
	hdr := perfRun(t, nil, "report", "--header-only", "-I", "-i", path)
	for _, want := range []string{
		"# cpudesc : Test CPU @ 2.00GHz",
		"# cpuid : GenuineIntel,6,85,7",
		"# total memory : 25165824 kB",
		"# sibling sockets : 0-1",
		"# sibling dies    : 0-1",
		"# sibling threads : 1",
		"# CPU 1: Core ID 1, Die ID 0, Socket ID 0",
		"# node0 meminfo  : total = 25165824 kB, free = 20971520 kB",
		"# node0 cpu list : 0-1",
		"# pmu mappings: cpu = 4, software = 1",
		"#  L2 Unified            1024K [0]",
		"# memory nodes (nr 1, block size 0x8000000):",
		"#    0 [640M]: 0-3,70",
		"# ibs_op pmu capabilities: zen4_ibs_extensions=1",
		"# clockid frequency: 1000 MHz",
		"# clockid: monotonic (1)",
	} {
		if !strings.Contains(hdr, want) {
			t.Errorf("perf report --header-only: no %q in\n%s", want, hdr)
		}
	}
}
