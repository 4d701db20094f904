package profconv

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/synth-dev/synth/synth"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Attribute keys of the semantic conventions.
const (
	attrBuildIDGNU     = "process.executable.build_id.gnu"
	attrBuildIDGo      = "process.executable.build_id.go"
	attrBuildIDHtlhash = "process.executable.build_id.htlhash"
	attrPid            = "process.pid"
	attrTid            = "thread.id"
	attrThreadName     = "thread.name"
	attrHostName       = "host.name"
)

// dict builds a ProfilesDictionary, interning its strings and
// attributes: each table starts with its zero entry, as the protocol
// asks of every table.
type dict struct {
	d       pprofile.ProfilesDictionary
	strs    map[string]int32
	attrs   map[string]int32
	funcs   map[string]int32
	mapping []int32 // the converter's mapping i is table entry mapping[i]
}

func newDict(d pprofile.ProfilesDictionary) *dict {
	t := &dict{d: d, strs: map[string]int32{}, attrs: map[string]int32{}, funcs: map[string]int32{}}
	t.str("")
	d.MappingTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	return t
}

func (t *dict) str(s string) int32 {
	if i, ok := t.strs[s]; ok {
		return i
	}
	i := int32(t.d.StringTable().Len())
	t.d.StringTable().Append(s)
	t.strs[s] = i
	return i
}

// attr interns the attribute key=value (a string or an int64).
func (t *dict) attr(key string, v any) int32 {
	k := fmt.Sprintf("%s\x00%T\x00%v", key, v, v)
	if i, ok := t.attrs[k]; ok {
		return i
	}
	a := t.d.AttributeTable().AppendEmpty()
	a.SetKeyStrindex(t.str(key))
	switch v := v.(type) {
	case string:
		a.Value().SetStr(v)
	case int64:
		a.Value().SetInt(v)
	}
	i := int32(t.d.AttributeTable().Len() - 1)
	t.attrs[k] = i
	return i
}

// OTLP builds the OTLP profiles request (pprofileotlp.NewExportRequestFromProfiles wraps it as one) of the samples taken in so
// far: one resource (the recording host), and per event two profiles
// of one sample type each (the protocol's Profile has one): its
// samples/count and EVENT/UNIT, over one dictionary. Each mapping of a
// file carries process.executable.build_id.gnu when its build ID is
// known, .go when the file at hand has one, and .htlhash when the file
// at hand is provably the one mapped; the kernel's and the vDSO's carry
// their GNU build ID; anonymous and JIT mappings, which have no file,
// carry none.
func (c *Converter) OTLP() (pprofile.Profiles, error) {
	c.finish()
	ps := pprofile.NewProfiles()
	t := newDict(ps.Dictionary())
	rp := ps.ResourceProfiles().AppendEmpty()
	if c.hostname != "" {
		rp.Resource().Attributes().PutStr(attrHostName, c.hostname)
	}
	sp := rp.ScopeProfiles().AppendEmpty()
	sp.Scope().SetName("github.com/synth-dev/synth/profconv")
	c.otlpMappings(t)
	c.otlpLocations(t)
	stacks := c.otlpStacks(t)
	types, events := c.sampleTypes()
	for ti, ty := range types {
		pr := sp.Profiles().AppendEmpty()
		pr.SampleType().SetTypeStrindex(t.str(ty[0]))
		pr.SampleType().SetUnitStrindex(t.str(ty[1]))
		e := c.events[events[ti/2]]
		pr.PeriodType().SetTypeStrindex(t.str(e.name))
		pr.PeriodType().SetUnitStrindex(t.str(e.unit))
		if e.attr.Flags&attrFreq == 0 {
			pr.SetPeriod(int64(e.attr.SamplePeriod))
		}
		pr.SetDurationNano(c.last - c.first)
		for i, a := range c.order {
			v := a.values[2*events[ti/2]+ti%2]
			if v == 0 {
				continue
			}
			s := pr.Samples().AppendEmpty()
			s.SetStackIndex(stacks[i])
			s.Values().Append(v)
			s.AttributeIndices().Append(t.attr(attrPid, int64(a.pid)), t.attr(attrTid, int64(a.tid)))
			if a.comm != "" {
				s.AttributeIndices().Append(t.attr(attrThreadName, a.comm))
			}
		}
	}
	return ps, nil
}

func (c *Converter) otlpMappings(t *dict) {
	t.mapping = make([]int32, len(c.maps))
	for i, m := range c.maps {
		om := t.d.MappingTable().AppendEmpty()
		om.SetMemoryStart(m.start)
		om.SetMemoryLimit(m.end)
		if m.kind != synth.LocationKernel {
			om.SetFileOffset(m.pgoff)
		}
		om.SetFilenameStrindex(t.str(m.path))
		if m.buildID != nil {
			om.AttributeIndices().Append(t.attr(attrBuildIDGNU, hex.EncodeToString(m.buildID)))
		}
		if m.goID != "" {
			om.AttributeIndices().Append(t.attr(attrBuildIDGo, m.goID))
		}
		if m.htlhash != "" {
			om.AttributeIndices().Append(t.attr(attrBuildIDHtlhash, m.htlhash))
		}
		t.mapping[i] = int32(t.d.MappingTable().Len() - 1)
	}
}

func (c *Converter) otlpLocations(t *dict) {
	for _, l := range c.locs {
		ol := t.d.LocationTable().AppendEmpty()
		ol.SetAddress(l.addr)
		if l.mapping < 0 {
			continue
		}
		m := c.maps[l.mapping]
		ol.SetMappingIndex(t.mapping[l.mapping])
		name := m.name(l.addr)
		if name == "" {
			continue
		}
		key := name + "\x00" + m.path
		fi, ok := t.funcs[key]
		if !ok {
			f := t.d.FunctionTable().AppendEmpty()
			f.SetNameStrindex(t.str(name))
			f.SetSystemNameStrindex(t.str(name))
			f.SetFilenameStrindex(t.str(m.path))
			fi = int32(t.d.FunctionTable().Len() - 1)
			t.funcs[key] = fi
		}
		ol.Lines().AppendEmpty().SetFunctionIndex(fi)
	}
}

// otlpStacks adds the stack of each aggregated sample; the location
// table's entry of location i is i+1.
func (c *Converter) otlpStacks(t *dict) []int32 {
	idx := make([]int32, len(c.order))
	seen := map[string]int32{}
	for i, a := range c.order {
		key := fmt.Sprint(a.locs)
		if j, ok := seen[key]; ok {
			idx[i] = j
			continue
		}
		st := t.d.StackTable().AppendEmpty()
		for _, l := range a.locs {
			st.LocationIndices().Append(l + 1)
		}
		idx[i] = int32(t.d.StackTable().Len() - 1)
		seen[key] = idx[i]
	}
	return idx
}

// ProfilesPath is where OTLP/HTTP receives profiles.
const ProfilesPath = "/v1development/profiles"

// Send posts req to the OTLP/HTTP endpoint (http://HOST:PORT, or a URL
// with the whole path), as protobuf, within timeout. An error is one
// line that says whether the endpoint refused the request, could not
// be reached, or did not answer in time.
func Send(ctx context.Context, endpoint string, ps pprofile.Profiles, timeout time.Duration) error {
	body, err := Marshal(ps)
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	url := endpoint
	if host := strings.TrimPrefix(strings.TrimPrefix(endpoint, "http://"), "https://"); !strings.Contains(strings.TrimSuffix(host, "/"), "/") {
		url = strings.TrimSuffix(endpoint, "/") + ProfilesPath // no path, or "/"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("send to %s: %w", endpoint, err)
	}
	hr.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return sendError(url, timeout, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s refused the profiles: %s%s", url, resp.Status, firstLine(answer))
	}
	return nil
}

// sendError words a failed POST in one line.
func sendError(url string, timeout time.Duration, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%s did not answer within %v", url, timeout)
	case errors.Is(err, errConnRefused()):
		return fmt.Errorf("%s is unreachable: connection refused", url)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("%s is unreachable: %v", url, oe.Err)
	}
	return fmt.Errorf("send to %s: %v", url, err)
}

// firstLine is ": " and the first line of an answer's body, if any.
func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if s == "" || !isText(s) {
		return ""
	}
	return ": " + s[:min(len(s), 200)]
}

func isText(s string) bool {
	for _, r := range s {
		if r < ' ' && r != '\t' || r == 0xfffd {
			return false
		}
	}
	return true
}

// WriteOTLP writes req to path as protobuf, as the body of an OTLP/HTTP
// request.
func WriteOTLP(path string, ps pprofile.Profiles) error {
	b, err := Marshal(ps)
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}

func errConnRefused() error { return syscall.ECONNREFUSED }

// Marshal encodes ps as an OTLP ExportProfilesServiceRequest in
// protobuf: what pprofileotlp.ExportRequest.MarshalProto writes, by the
// same encoder, without pprofileotlp, which would bring gRPC into the
// binary.
func Marshal(ps pprofile.Profiles) ([]byte, error) {
	return (&pprofile.ProtoMarshaler{}).MarshalProfiles(ps)
}
