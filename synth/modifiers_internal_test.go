package synth

import (
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// The modifiers set the attr bits, and an event that replaced cycles is
// named, as perf 6.1 records them (perf record -e cycles:MODS on a VM
// without a PMU, then perf evlist -v).
func TestModifiers(t *testing.T) {
	const (
		eu, ek, eh = perfdata.AttrExcludeUser, perfdata.AttrExcludeKernel, perfdata.AttrExcludeHV
		eG, eH     = perfdata.AttrExcludeGuest, attrExcludeHost
	)
	p := func(n uint64) uint64 { return n << attrPreciseIP }
	for _, tc := range []struct {
		mods     string
		flags    uint64
		read     bool
		fellBack string // perf's name of cycles:MODS fallen back to cpu-clock
	}{
		{"", eG, false, "cpu-clock"},
		{"u", ek | eh | eG, false, "cpu-clock:uH"},
		{"k", eu | eh, false, "cpu-clock:k"},
		{"h", eu | ek, false, "cpu-clock:h"},
		{"uk", eh | eG, false, "cpu-clock:kuH"},
		{"p", p(1) | eG, false, "cpu-clock:pH"},
		{"ppp", p(3) | eG, false, "cpu-clock:pppH"},
		{"P", p(3), false, "cpu-clock:ppp"},
		{"kP", eu | eh | p(3), false, "cpu-clock:kppp"},
		{"S", 0, true, "cpu-clock:HG"},
		{"G", eH, false, "cpu-clock:G"},
		{"H", eG, false, "cpu-clock"},
		{"GH", 0, false, "cpu-clock:HG"},
		{"uG", ek | eh | eH, false, "cpu-clock:uG"},
		{"D", attrPinned, false, "cpu-clock:HG"},
		{"I", attrExcludeIdle, false, "cpu-clock:HG"},
		{"e", attrExclusive, false, "cpu-clock:HG"},
	} {
		m, err := parseModifiers(tc.mods, tc.mods != "")
		if err != nil || m.flags != tc.flags || m.sampleRead != tc.read {
			t.Errorf("%q: flags %#x read %v (%v), want %#x %v", tc.mods, m.flags, m.sampleRead, err, tc.flags, tc.read)
		}
		if name := modifierName("cpu-clock", m.flags); name != tc.fellBack {
			t.Errorf("%q: named %s, want %s", tc.mods, name, tc.fellBack)
		}
	}
	for _, bad := range []string{"pppp", "uu", "x", "kk", "pSS"} {
		if _, err := parseModifiers(bad, true); err == nil {
			t.Errorf("%q: taken, perf refuses it", bad)
		}
	}
}
