package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// modifierStrings are the modifier strings of perf 6.1's -e EVENT:MODS
// that a test compares: each modifier alone, with :u and :k, and some
// of perf's combinations.
var modifierStrings = map[string][]string{
	"cycles": {"", "u", "k", "h", "p", "pp", "ppp", "P", "S", "G", "H", "D", "I", "e", "W", "b",
		"up", "pu", "kp", "upp", "kpp", "uppp", "kppp", "uP", "kP", "uS", "kS", "uG", "kG", "uH", "kH", "uD", "kD",
		"uk", "ppP", "pS", "pD", "GH", "ukpS", "-"},
	// Named as given, not from the attr as cycles is where it fell back.
	"cpu-clock":  {"", "u", "k", "pu", "P", "uS", "GH", "-"},
	"task-clock": {"ppp", "kD"},
}

// evlistModRE picks from perf evlist -v what an event's modifiers set.
var evlistModRE = regexp.MustCompile(`^[^ ]+:|type: \d+|config: \S+|exclude_\w+: 1|precise_ip: \d|pinned: 1|exclusive: 1|sample_type: \S*READ`)

// synth record -e EVENT:MODS writes the attr perf record 6.1 writes for
// every modifier string perf accepts: the excludes, precise_ip, pinned,
// exclusive, the count in each sample (S), and the name, the one perf
// gives (cpu-clock:uH where cycles fell back to cpu-clock, as on a VM
// without a PMU, where both fall back). What perf refuses, synth refuses
// in one line, status 2.
func TestRecordEventModifiersMatchPerf(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	dir := t.TempDir()
	strs := modifierStrings
	if testing.Short() {
		strs = map[string][]string{"cycles": {"", "u", "k", "pp", "P", "S", "uG"}}
	}
	for ev, modStrings := range strs {
		for _, mods := range modStrings {
			event := ev
			switch mods {
			case "":
			case "-":
				event += ":" // perf takes it as no modifier
			default:
				event += ":" + mods
			}
			want := recordedEvent(t, perf, filepath.Join(dir, "perf.data"), exec.Command(perf, "record", "-q", "-e", event))
			got := recordedEvent(t, perf, filepath.Join(dir, "synth.data"), exec.Command(synthBin, "record", "-q", "-e", event))
			if got != want {
				t.Errorf("-e %s: synth's attr\n\t%s\nperf's\n\t%s", event, got, want)
			}
		}
	}
	for _, event := range []string{"cycles:pppp", "cycles:uu", "cycles:x", "cpu-clock:kk", "cpu-clock:pSS", "cpu-clock:ux"} {
		pr := runCmd(t, exec.Command(perf, "record", "-q", "-e", event, "-o", filepath.Join(dir, "no.data"), "--", "true"))
		sr := runCmd(t, exec.Command(synthBin, "record", "-q", "-e", event, "-o", filepath.Join(dir, "no.data"), "--", "true"))
		if pr.code == 0 {
			t.Errorf("perf record -e %s: exit 0, taken for refused", event)
		}
		if sr.code != exitUsage || strings.Count(sr.stderr, "\n") != 1 || !strings.HasPrefix(sr.stderr, "synth record: -e "+event+": ") {
			t.Errorf("synth record -e %s: exit %d, stderr %q; want %d and one line", event, sr.code, sr.stderr, exitUsage)
		}
	}
}

// recordedEvent runs a recording of true into out with cmd and returns
// what its event's modifiers set, as perf evlist -v shows it.
func recordedEvent(t *testing.T, perf, out string, cmd *exec.Cmd) string {
	t.Helper()
	cmd.Args = append(cmd.Args, "-o", out, "--", "true")
	cmd.Env = perfEnv(t)
	if r := runCmd(t, cmd); r.code != 0 {
		t.Fatalf("%s: exit %d: %s", cmd, r.code, r.stderr)
	}
	ev := exec.Command(perf, "evlist", "-v", "-i", out)
	ev.Env = perfEnv(t)
	r := runCmd(t, ev)
	if r.code != 0 || strings.TrimSpace(r.stderr) != "" {
		t.Fatalf("perf evlist -v -i %s: exit %d: %s", out, r.code, r.stderr)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if l != "" && !strings.HasPrefix(l, "dummy") {
			return strings.Join(evlistModRE.FindAllString(l, -1), " ")
		}
	}
	t.Fatalf("perf evlist -v -i %s: no event but dummies:\n%s", out, r.stdout)
	return ""
}
