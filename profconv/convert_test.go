package profconv

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/perfdata"
)

const sampleType = perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
	perfdata.SamplePeriod | perfdata.SampleCallchain

// libc is a shared library at hand with a GNU build ID and exported
// functions, and one of them: its name and file offset.
type libc struct {
	path    string
	buildID []byte
	fn      string
	off     uint64
	size    int64
}

func findLibc(t *testing.T) libc {
	t.Helper()
	paths, _ := filepath.Glob("/usr/lib/*/libc.so.6")
	paths2, _ := filepath.Glob("/lib*/libc.so.6")
	for _, p := range append(paths, paths2...) {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		defer f.Close()
		st, _ := os.Stat(p)
		r, _ := os.Open(p)
		id, _ := elfnote.BuildID(r, st.Size())
		r.Close()
		syms, _ := f.DynamicSymbols()
		for _, s := range syms {
			if s.Name != "getpid" || elf.ST_TYPE(s.Info) != elf.STT_FUNC {
				continue
			}
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_LOAD && s.Value >= prog.Vaddr && s.Value < prog.Vaddr+prog.Filesz {
					return libc{path: p, buildID: id, fn: s.Name, off: s.Value - prog.Vaddr + prog.Off, size: st.Size()}
				}
			}
		}
	}
	t.Skip("no libc.so.6 with getpid at hand")
	return libc{}
}

// writeFile writes a pipe-mode perf.data of process 42: a COMM, the
// mappings ms at 0x10000000 apart, and per mapping a sample in it (at
// off), then one at an address no mapping holds.
func writeFile(t *testing.T, ms []perfdata.Mmap2, off uint64) []byte {
	t.Helper()
	attr := perfdata.Attr{Type: perfdata.TypeSoftware, Config: perfdata.CountSWCPUClock, SampleType: sampleType,
		SamplePeriod: 1000000, Flags: perfdata.AttrSampleIDAll | perfdata.AttrMmap2}
	var out bytes.Buffer
	w, err := perfdata.NewWriter(&out, perfdata.WriterOptions{Attrs: []perfdata.EventAttr{{Attr: attr, Name: "cpu-clock", IDs: []uint64{7}}}, Mode: perfdata.ModePipe})
	if err != nil {
		t.Fatal(err)
	}
	sid := &perfdata.SampleID{Pid: 42, Tid: 42, ID: 7, Identifier: 7}
	c := perfdata.Comm{Pid: 42, Tid: 42, Comm: "victim"}
	w.WriteRecord(c.Append(nil, sampleType, sid))
	var ips []uint64
	for i, m := range ms {
		m.Pid, m.Tid, m.Addr = 42, 42, uint64(i+1)<<28
		w.WriteRecord(m.Append(nil, sampleType, sid))
		ips = append(ips, m.Addr+off-m.Pgoff)
	}
	ips = append(ips, 0x1234)
	for i, ip := range ips {
		s := perfdata.Sample{Identifier: 7, IP: ip, Pid: 42, Tid: 42, Time: uint64(1000 + i), Period: 1000000,
			Callchain: []uint64{^uint64(511), ip}} // PERF_CONTEXT_USER, then the IP
		w.WriteRecord(s.Append(nil, &attr))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func convert(t *testing.T, data []byte) *Converter {
	t.Helper()
	c, err := Read(bytes.NewReader(data), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A mapping of a file at hand with its build ID is symbolized; one
// whose file at hand has another build ID (replaced since) keeps the
// record's and gets no names; one identified by an inode the file at
// hand does not have gets neither; a sample in no mapping is a
// location without one, counted.
func TestFileIdentity(t *testing.T) {
	lc := findLibc(t)
	wrong := bytes.Repeat([]byte{0xaa}, 20)
	page := lc.off &^ 0xfff
	ms := []perfdata.Mmap2{
		{BuildID: lc.buildID, Len: 0x100000, Pgoff: page, Prot: 5, Filename: lc.path},
		{BuildID: wrong, Len: 0x100000, Pgoff: page, Prot: 5, Filename: lc.path},
		{Maj: 1, Min: 2, Ino: 3, Len: 0x100000, Pgoff: page, Prot: 5, Filename: lc.path},
	}
	c := convert(t, writeFile(t, ms, lc.off))
	p, err := c.Profile()
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Samples != 4 || st.Unmapped != 1 || st.WrongFile != 2 || st.Symbolized != 1 || st.NoBuildID != 1 {
		t.Errorf("stats %+v: want 4 samples, 1 unmapped, 2 wrong files, 1 symbolized, 1 without a build ID", st)
	}
	ids := []string{hex.EncodeToString(lc.buildID), hex.EncodeToString(wrong), ""}
	for i, m := range p.Mapping {
		if m.BuildID != ids[i] || m.HasFunctions != (i == 0) {
			t.Errorf("mapping %d: build ID %q, functions %v; want %q, %v", i, m.BuildID, m.HasFunctions, ids[i], i == 0)
		}
	}
	var named []string
	unmapped := 0
	for _, l := range p.Location {
		for _, ln := range l.Line {
			named = append(named, ln.Function.Name)
		}
		if l.Mapping == nil {
			unmapped++
		}
	}
	if len(named) != 1 || named[0] != lc.fn || unmapped != 1 {
		t.Errorf("functions %v, %d locations without a mapping; want [%s], 1", named, unmapped, lc.fn)
	}
	if v := p.Sample[0].Value; len(v) != 2 || v[0] != 1 || v[1] != 1000000 {
		t.Errorf("values %v, want [1 1000000]", v)
	}
}

// decode decodes a request body as the collector does.
func decode(t *testing.T, b []byte) pprofileotlp.ExportRequest {
	t.Helper()
	req := pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		t.Fatalf("pprofileotlp: %v", err)
	}
	return req
}

// The OTLP request posted to an endpoint decodes with the collector's
// own decoder; a refusal, an endpoint that does not answer in time
// and one nobody listens on are each one line that says so.
func TestSend(t *testing.T) {
	lc := findLibc(t)
	c := convert(t, writeFile(t, []perfdata.Mmap2{{BuildID: lc.buildID, Len: 0x100000, Pgoff: lc.off &^ 0xfff, Prot: 5, Filename: lc.path}}, lc.off))
	ps, err := c.OTLP()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan pprofileotlp.ExportRequest, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != ProfilesPath || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "wrong path or type", http.StatusNotFound)
			return
		}
		got <- decode(t, b)
	}))
	defer srv.Close()
	if err := Send(context.Background(), srv.URL, ps, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	req := <-got
	dict := req.Profiles().Dictionary()
	var gnu []string
	for _, m := range dict.MappingTable().All() {
		for _, i := range m.AttributeIndices().All() {
			a := dict.AttributeTable().At(int(i))
			if dict.StringTable().At(int(a.KeyStrindex())) == attrBuildIDGNU {
				gnu = append(gnu, a.Value().AsString())
			}
		}
	}
	// Two profiles (samples, cpu-clock) of 2 samples: libc's, and one
	// in no mapping.
	if n := req.Profiles().SampleCount(); n != 4 || len(gnu) != 1 || gnu[0] != hex.EncodeToString(lc.buildID) {
		t.Errorf("decoded %d samples, build IDs %v; want 4, [%x]", n, gnu, lc.buildID)
	}

	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "profiles are not enabled", http.StatusNotFound)
	}))
	defer refuse.Close()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer slow.Close()
	defer close(hang)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, tc := range []struct {
		url, want string
	}{
		{refuse.URL, " refused the profiles: 404 Not Found: profiles are not enabled"},
		{slow.URL, " did not answer within 100ms"},
		{gone.URL, " is unreachable: connection refused"},
	} {
		err := Send(context.Background(), tc.url, ps, 100*time.Millisecond)
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Send to %s: %v; want one line ending %q", tc.url, err, tc.want)
		}
	}
}

// A stream cut short is an error, not a profile of what came before.
func TestTruncated(t *testing.T) {
	data := writeFile(t, []perfdata.Mmap2{{Len: 0x1000, Prot: 5, Filename: "/nonexistent"}}, 0)
	_, err := Read(bytes.NewReader(data[:len(data)-5]), Options{})
	if err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("truncated stream: %v", err)
	}
	if _, err := Read(bytes.NewReader(data[:200]), Options{}); !errors.Is(err, ErrNoSamples) && (err == nil || !strings.Contains(err.Error(), "cut short")) {
		t.Errorf("stream cut before its samples: %v", err)
	}
}
