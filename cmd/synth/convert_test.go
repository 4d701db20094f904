package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

// userHome is HOME before TestMain moves it: go tool pprof is built
// into the Go cache under it, and a new HOME would have it built again,
// minutes on a loaded host.
var userHome = os.Getenv("HOME")

// pprofTool returns the path of go tool pprof's binary, built once.
func pprofTool(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	testenv.Need(t, err == nil, "go (go tool pprof)")
	cmd := exec.Command(gobin, "tool", "-n", "pprof")
	cmd.Env = append(os.Environ(), "HOME="+userHome)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool -n pprof: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// recordSpinning runs recorder (synth record or perf record, given its
// arguments but the last, the output) on the spinner until the spinner
// has run 2 s of CPU, then stops it with SIGINT as Ctrl-C does: bounded
// by the spinner's work, not by a sleep, on a loaded host too.
func recordSpinning(t *testing.T, pid int, out *os.File, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = perfEnv(t)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	base := testproc.CPUTicks(pid)
	if ended, err := waitFor(t, done, func() bool { return testproc.CPUTicks(pid)-base >= 200 }); ended {
		t.Fatalf("%s ended before the spinner ran 2 s: %v: %s", args, err, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(endBound):
		cmd.Process.Kill()
		t.Fatalf("%s did not end within %v of SIGINT", args, endBound)
	}
}

// readelfBuildID is readelf -n's build ID of file.
func readelfBuildID(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("readelf", "-n", file).Output()
	if err != nil {
		t.Skipf("readelf: %v", err)
	}
	m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("readelf -n %s: no build ID:\n%s", file, out)
	}
	return string(m[1])
}

var (
	// "  1.23s 45.67% 45.67%  1.23s 45.67%  main_spin"
	pprofTopRE = regexp.MustCompile(`(?m)^\s*\S+\s+([\d.]+)%\s+[\d.]+%\s+\S+\s+[\d.]+%\s+(\S+)`)
	// "2: 0x55d2cb62b000/0x55d2cb62c000/0x1000 /tmp/spin 5a00bb... [FN]"
	pprofRawMapRE = regexp.MustCompile(`(?m)^\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ (\S+) ([0-9a-f]*)`)
)

// synth convert of a recording of the spinner, synth's and perf's own
// (file and pipe), reads in go tool pprof with both loops named and
// each mapping's build ID readelf's, and its OTLP request decodes with
// the collector's own decoder, with the samples and the build IDs.
func TestConvertMatchesTools(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	pprof := pprofTool(t)
	spin := buildSpin(t)
	lib := filepath.Join(filepath.Dir(spin), "libspin.so")
	want := map[string]string{"spin": readelfBuildID(t, spin), "libspin.so": readelfBuildID(t, lib)}
	pid := startSpin(t, spin)
	// A loaded host leaves the spinner little CPU: it is bounded by its
	// work, and favoured so that the test ends sooner.
	syscall.Setpriority(syscall.PRIO_PROCESS, pid, -10)
	dir := t.TempDir()
	p := strconv.Itoa(pid)
	for _, tc := range []struct {
		name string
		rec  []string
		pipe bool
	}{
		{"synth", []string{synthBin, "record", "-F", "999", "-g", "-p", p, "-o"}, false},
		{"perf", []string{perf, "record", "-q", "-F", "999", "-g", "-p", p, "-o"}, false},
		{"perf-pipe", []string{perf, "record", "-q", "-F", "999", "-g", "-p", p, "-o", "-"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(dir, tc.name+".data")
			f, err := os.Create(data)
			if err != nil {
				t.Fatal(err)
			}
			args := tc.rec
			if !tc.pipe {
				args = append(args, data)
			}
			recordSpinning(t, pid, f, args...)
			f.Close()
			pb, otlp := filepath.Join(dir, tc.name+".pb.gz"), filepath.Join(dir, tc.name+".otlp")
			conv := exec.Command(synthBin, "convert", "-i", data, "--to-pprof", pb, "--to-otlp", otlp)
			if tc.pipe {
				in, _ := os.Open(data)
				defer in.Close()
				conv = exec.Command(synthBin, "convert", "-i", "-", "--to-pprof", pb, "--to-otlp", otlp)
				conv.Stdin = in
			}
			r := runCmd(t, conv)
			if r.code != 0 {
				t.Fatalf("synth convert: exit %d: %s", r.code, r.stderr)
			}
			t.Log(strings.TrimSpace(r.stderr))
			checkPprof(t, pprof, pb, want)
			checkOTLP(t, otlp, want, spin, lib)
		})
	}
}

// checkPprof checks go tool pprof -top and -raw of profile pb.
func checkPprof(t *testing.T, pprof, pb string, want map[string]string) {
	t.Helper()
	top := runCmd(t, exec.Command(pprof, "-top", pb))
	if top.code != 0 {
		t.Fatalf("go tool pprof -top: exit %d: %s", top.code, top.stderr)
	}
	flat := map[string]float64{}
	for _, m := range pprofTopRE.FindAllStringSubmatch(top.stdout, -1) {
		flat[m[2]], _ = strconv.ParseFloat(m[1], 64)
	}
	if flat["main_spin"] < 20 || flat["lib_spin"] < 20 {
		t.Errorf("go tool pprof -top: main_spin %.2f%%, lib_spin %.2f%% flat, want >= 20%% each:\n%s", flat["main_spin"], flat["lib_spin"], top.stdout)
	}
	t.Logf("go tool pprof -top:\n%s", top.stdout)
	raw := runCmd(t, exec.Command(pprof, "-raw", pb))
	if raw.code != 0 {
		t.Fatalf("go tool pprof -raw: exit %d: %s", raw.code, raw.stderr)
	}
	got := map[string]string{}
	for _, m := range pprofRawMapRE.FindAllStringSubmatch(raw.stdout, -1) {
		got[filepath.Base(m[1])] = m[2]
		if _, ok := want[filepath.Base(m[1])]; ok {
			t.Logf("go tool pprof -raw: %s", m[0])
		}
	}
	for file, id := range want {
		if got[file] != id {
			t.Errorf("go tool pprof -raw: %s has build ID %q, readelf -n says %s", file, got[file], id)
		}
	}
}

// checkOTLP decodes the OTLP request with the collector's decoder.
func checkOTLP(t *testing.T, path string, want map[string]string, spin, lib string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	req := pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		t.Fatalf("pprofileotlp: %v", err)
	}
	ps := req.Profiles()
	dict := ps.Dictionary()
	strs := dict.StringTable()
	maps := map[string]pprofile.Mapping{}
	for _, m := range dict.MappingTable().All() {
		maps[filepath.Base(strs.At(int(m.FilenameStrindex())))] = m
	}
	attrs := func(m pprofile.Mapping) map[string]string {
		kv := map[string]string{}
		for _, i := range m.AttributeIndices().All() {
			a := dict.AttributeTable().At(int(i))
			kv[strs.At(int(a.KeyStrindex()))] = a.Value().AsString()
		}
		return kv
	}
	htl := map[string]string{"spin": htlhashOf(t, spin), "libspin.so": htlhashOf(t, lib)}
	for file, id := range want {
		m, ok := maps[file]
		if !ok {
			t.Errorf("OTLP: no mapping of %s", file)
			continue
		}
		kv := attrs(m)
		if kv["process.executable.build_id.gnu"] != id || kv["process.executable.build_id.htlhash"] != htl[file] {
			t.Errorf("OTLP: %s has %v, want build_id.gnu %s (readelf -n), htlhash %s", file, kv, id, htl[file])
		}
	}
	t.Logf("OTLP decoded: %d resource profiles, %d profiles, %d samples, %d mappings, %d locations, %d functions, %d stacks",
		ps.ResourceProfiles().Len(), ps.ProfileCount(), ps.SampleCount(), dict.MappingTable().Len()-1,
		dict.LocationTable().Len()-1, dict.FunctionTable().Len()-1, dict.StackTable().Len()-1)
	if ps.SampleCount() == 0 {
		t.Error("OTLP: no samples")
	}
}

// htlhashOf computes OpenTelemetry's htlhash of a file, as the
// profiles specification's mappings page writes it out.
func htlhashOf(t *testing.T, file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	in := append(append(bytes.Clone(b[:min(len(b), 4096)]), b[max(0, len(b)-4096):]...), binary.BigEndian.AppendUint64(nil, uint64(len(b)))...)
	sum := sha256.Sum256(in)
	return hex.EncodeToString(sum[:16])
}
