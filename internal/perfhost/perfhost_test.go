package perfhost

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

// TestPerfReadsHost writes this host's description and has perf read it
// back: the hostname, the CPUs online, the command line and the clock.
func TestPerfReadsHost(t *testing.T) {
	attr := perfdata.Attr{Type: 1, Size: perfdata.AttrSize, Config: 9, SamplePeriod: 1,
		Flags: perfdata.AttrMmap2 | perfdata.AttrUseClockID | perfdata.AttrSampleIDAll, ClockID: 1}
	attrs := []perfdata.EventAttr{{Attr: attr, Name: "dummy:u"}}
	path := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := perfdata.NewWriter(f, perfdata.WriterOptions{Attrs: attrs,
		Features: WithClock(Features([]string{"synth", "perfhost-test"}), attrs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.Perf(t), "report", "--header-only", "-I", "-i", path)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("perf report --header-only: %v\n%s", err, stderr.String())
	}
	host, _ := os.Hostname()
	s, _ := readTrim("/sys/devices/system/cpu/online")
	online, err := procfs.CPUList(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# hostname : " + host,
		"# nrcpus online : " + strconv.Itoa(len(online)),
		"# cmdline : synth perfhost-test",
		"# clockid: monotonic (1)",
		"# sibling sockets : ",
		"# pmu mappings: ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("perf report --header-only: no %q in\n%s", want, out.String())
		}
	}
	if got := WithClock(WithClock(nil, attrs), attrs); len(got) != 2 {
		t.Errorf("WithClock twice gave %d features, want CLOCKID and CLOCK_DATA once", len(got))
	}
}
