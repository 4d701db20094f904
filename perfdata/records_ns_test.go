package perfdata

import (
	"reflect"
	"testing"
)

func TestNamespacesRoundTrip(t *testing.T) {
	n := Namespaces{Pid: 10, Tid: 11, Links: make([]NSLink, NumNS)}
	for i := range n.Links {
		n.Links[i] = NSLink{Dev: 4, Ino: 4026531832 + uint64(i)}
	}
	rec := n.Append(nil, testST, &testSID)
	// header 8, pid/tid 8, nr 8, 7 links of 16: the 136 bytes perf writes.
	if want := 136 + SampleIDSize(testST); len(rec) != want {
		t.Errorf("namespaces record of %d bytes, want %d", len(rec), want)
	}
	got, sid, err := ParseNamespaces(rec, testST)
	if err != nil || !reflect.DeepEqual(got, n) || sid != testSID {
		t.Errorf("namespaces: %+v %+v %v", got, sid, err)
	}
	le.PutUint64(rec[16:], 8) // one link more than the record holds
	if _, _, err := ParseNamespaces(rec, testST); err == nil {
		t.Error("a namespace count past the record's end parsed")
	}
}

func TestCgroupRoundTrip(t *testing.T) {
	c := Cgroup{ID: 1, Path: "/"}
	rec := c.Append(nil, 0, nil)
	// header 8, id 8, "/" padded to 8: perf's 0x18 before the trailer.
	if len(rec) != 24 {
		t.Errorf("cgroup record of %d bytes, want 24", len(rec))
	}
	got, _, err := ParseCgroup(rec, 0)
	if err != nil || got != c {
		t.Errorf("cgroup: %+v %v", got, err)
	}
	f := Fork{Misc: MiscForkExec, Pid: 5, Ppid: 1, Tid: 5, Ptid: 1}
	gf, _, err := ParseFork(f.Append(nil, 0, nil), 0)
	if err != nil || gf != f {
		t.Errorf("fork with misc: %+v %v", gf, err)
	}
}

// FuzzParseNamespaces: a record that parses re-encodes to one that
// parses to the same values.
func FuzzParseNamespaces(f *testing.F) {
	n := Namespaces{Pid: 1, Tid: 2, Links: []NSLink{{4, 5}, {4, 6}}}
	f.Add(n.Append(nil, testST, &testSID))
	f.Fuzz(func(t *testing.T, rec []byte) {
		got, sid, err := ParseNamespaces(rec, testST)
		if err != nil {
			return
		}
		again, sid2, err := ParseNamespaces(got.Append(nil, testST, &sid), testST)
		if err != nil || !reflect.DeepEqual(again, got) || sid2 != sid {
			t.Fatalf("re-encoded record differs: %+v vs %+v (%v)", again, got, err)
		}
	})
}
