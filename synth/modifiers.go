package synth

import (
	"fmt"
	"strings"

	"github.com/synth-dev/synth/perfdata"
)

// perf_event_attr flag bits that only perf's event modifiers set.
const (
	attrPinned      = 1 << 2
	attrExclusive   = 1 << 3
	attrExcludeIdle = 1 << 7
	attrPreciseIP   = 15 // the shift of the 2-bit precise_ip
	attrExcludeHost = 1 << 19
)

// modifierChars are the modifiers perf 6.1 reads after an event's colon
// (get_event_modifier), each at most once but p, in its longest string.
const modifierChars = "ukhGHpppPSDIWeb"

// eventModifiers is what an event's modifiers set in its attr, as perf
// 6.1's get_event_modifier and evsel__config set it.
type eventModifiers struct {
	flags      uint64 // the excludes, pinned, exclusive, precise_ip
	sampleRead bool   // S: the sample carries the count (PERF_SAMPLE_READ)
}

// splitEvent splits perf's EVENT:MODIFIERS.
func splitEvent(event string) (name, mods string, hasMods bool) {
	return strings.Cut(event, ":")
}

// parseModifiers reads an event's modifiers as perf 6.1 does, into the
// bits it sets. Without modifiers an event excludes the guest
// (event_attr_init); with them, from nothing, each as perf applies it:
// u, k and h exclude the other two of user, kernel and hypervisor, G and
// H the other of guest and host, u and p the guest unless G or H said
// otherwise; P is the highest precise_ip (3, which perf lowers only when
// the kernel refuses it: a cpu-clock takes it), W and b change nothing
// for one event.
func parseModifiers(mods string, hasMods bool) (eventModifiers, error) {
	if !hasMods || mods == "" {
		return eventModifiers{flags: perfdata.AttrExcludeGuest}, nil // perf takes cycles: as cycles
	}
	if err := checkModifiers(mods); err != nil {
		return eventModifiers{}, err
	}
	var eu, ek, eh, eH, eG, exclude, excludeGH bool
	var m eventModifiers
	precise := 0
	for _, c := range mods {
		switch c {
		case 'u', 'k', 'h':
			if !exclude {
				exclude, eu, ek, eh = true, true, true, true
			}
			switch c {
			case 'u':
				eu = false
				if !excludeGH {
					eG = true
				}
			case 'k':
				ek = false
			case 'h':
				eh = false
			}
		case 'G', 'H':
			if !excludeGH {
				excludeGH, eG, eH = true, true, true
			}
			if c == 'G' {
				eG = false
			} else {
				eH = false
			}
		case 'p':
			precise++
			if !excludeGH {
				eG = true
			}
		case 'P':
			precise = 3
		case 'S':
			m.sampleRead = true
		case 'D':
			m.flags |= attrPinned
		case 'e':
			m.flags |= attrExclusive
		case 'I':
			m.flags |= attrExcludeIdle
		}
	}
	for _, b := range []struct {
		on   bool
		flag uint64
	}{{eu, perfdata.AttrExcludeUser}, {ek, perfdata.AttrExcludeKernel}, {eh, perfdata.AttrExcludeHV},
		{eH, attrExcludeHost}, {eG, perfdata.AttrExcludeGuest}} {
		if b.on {
			m.flags |= b.flag
		}
	}
	m.flags |= uint64(precise) << attrPreciseIP
	return m, nil
}

// checkModifiers refuses what perf 6.1 refuses (check_modifier and the
// parser): a letter it does not know, one given twice but p, more than
// three p.
func checkModifiers(mods string) error {
	for i, c := range mods {
		if !strings.ContainsRune(modifierChars, c) {
			return fmt.Errorf("modifier %q is not one of perf's (%s)", c, "u, k, h, G, H, p, P, S, D, I, W, e, b")
		}
		if c != 'p' && strings.ContainsRune(mods[i+1:], c) {
			return fmt.Errorf("modifier %q given twice", c)
		}
	}
	if len(mods) > len(modifierChars) || strings.Count(mods, "p") > 3 {
		return fmt.Errorf("modifiers %q: at most ppp", mods)
	}
	return nil
}

// modifierName is the name perf gives an event from its attr, as it
// names one it fell back to (evsel__add_modifiers): cpu-clock:uH.
func modifierName(name string, flags uint64) string {
	var b strings.Builder
	unless := func(excluded uint64, c byte) {
		if flags&excluded == 0 {
			b.WriteByte(c)
		}
	}
	guestDefault := false
	if flags&(perfdata.AttrExcludeKernel|perfdata.AttrExcludeUser|perfdata.AttrExcludeHV) != 0 {
		unless(perfdata.AttrExcludeKernel, 'k')
		unless(perfdata.AttrExcludeUser, 'u')
		unless(perfdata.AttrExcludeHV, 'h')
		guestDefault = true
	}
	if p := flags >> attrPreciseIP & 3; p > 0 {
		b.WriteString("ppp"[:p])
		guestDefault = true
	}
	if flags&attrExcludeHost != 0 || (flags&perfdata.AttrExcludeGuest != 0) == guestDefault {
		unless(attrExcludeHost, 'H')
		unless(perfdata.AttrExcludeGuest, 'G')
	}
	if b.Len() == 0 {
		return name
	}
	return name + ":" + b.String()
}

// CheckEvent checks an event as perf record -e takes it: one of the
// events SampleOptions.Event names, with perf's modifiers (cycles:pp).
func CheckEvent(event string) error {
	name, mods, hasMods := splitEvent(event)
	if _, ok := sampleEvents[name]; !ok || name == "" {
		return fmt.Errorf("event %q: want %s, %s, %s or %s", name, EventCPUClock, EventTaskClock, EventCycles, EventInstructions)
	}
	_, err := parseModifiers(mods, hasMods)
	return err
}
