package synth_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

func TestMain(m *testing.M) {
	testproc.Main()
	testenv.ExamplesNeedRoot()
	os.Exit(m.Run())
}

// mapKey is what /proc/PID/maps says about a mapping, and what the dump
// must say about it.
type mapKey struct {
	pid                    uint32
	start, end, pgoff      uint64
	prot, shared, maj, min uint32
	ino                    uint64
	path                   string
	buildID                string // hex; maj, min and ino are then 0
}

func (k mapKey) String() string {
	return fmt.Sprintf("%d %x-%x %x prot=%d shared=%d %x:%x %d %q %s",
		k.pid, k.start, k.end, k.pgoff, k.prot, k.shared, k.maj, k.min, k.ino, k.path, k.buildID)
}

// procKeys reads what /proc/PID/maps says, keeping executable mappings
// only unless data is set.
func procKeys(t *testing.T, pid int, data bool) []mapKey {
	t.Helper()
	all, ok := tryProcKeys(pid, true)
	if !ok {
		t.Fatalf("cannot read /proc/%d/maps", pid)
	}
	var keys []mapKey
	for _, k := range all {
		if k.prot&4 != 0 || data {
			keys = append(keys, k)
		}
	}
	return keys
}

// dumped is one dump's records, decoded.
type dumped struct {
	stats  synth.Stats
	types  []perfdata.RecordType // record types in output order
	pids   []uint32              // pid of each record
	maps   []mapKey
	misc   []uint16 // misc of each MMAP2, parallel to maps
	comms  map[uint32]string
	forks  map[uint32]uint32 // tid -> pid
	kernel []perfdata.Mmap
	lost   uint64 // live records the kernel dropped (PERF_RECORD_LOST)
}

func runDump(t *testing.T, opts synth.Options) *dumped {
	t.Helper()
	testenv.Root(t)
	b, err := synth.NewBPF(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	return dumpWith(t, b, opts)
}

// dumpWith runs one dump of b, opened with opts.
func dumpWith(t *testing.T, b *synth.BPF, opts synth.Options) *dumped {
	t.Helper()
	st := opts.SampleType
	if st == 0 {
		st = synth.DefaultSampleType
	}
	var err error
	d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
	d.stats, err = b.Dump(context.Background(), func(rec []byte) error {
		return d.add(rec, st)
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.stats.Lost != 0 {
		t.Errorf("%d records lost", d.stats.Lost)
	}
	return d
}

func (d *dumped) add(rec []byte, sampleType uint64) error {
	typ := perfdata.RecordView(rec).Type()
	if typ == perfdata.RecordLost {
		// The kernel's count of live records it dropped on a busy
		// host: part of the output, but of no process.
		l, _, err := perfdata.ParseLost(rec, sampleType)
		d.lost += l.Lost
		return err
	}
	d.types = append(d.types, typ)
	switch typ {
	case perfdata.RecordMmap2:
		m, _, err := perfdata.ParseMmap2(rec, sampleType)
		if err != nil {
			return err
		}
		k := mapKey{pid: m.Pid, start: m.Addr, end: m.Addr + m.Len, pgoff: m.Pgoff,
			prot: m.Prot, maj: m.Maj, min: m.Min, ino: m.Ino, path: m.Filename}
		if m.Flags&1 != 0 {
			k.shared = 1
		}
		if m.BuildID != nil {
			k.buildID = hex.EncodeToString(m.BuildID)
		}
		d.maps = append(d.maps, k)
		d.misc = append(d.misc, m.Misc)
		d.pids = append(d.pids, m.Pid)
	case perfdata.RecordComm:
		c, _, err := perfdata.ParseComm(rec, sampleType)
		if err != nil {
			return err
		}
		d.comms[c.Tid] = c.Comm
		d.pids = append(d.pids, c.Pid)
	case perfdata.RecordFork:
		f, _, err := perfdata.ParseFork(rec, sampleType)
		if err != nil {
			return err
		}
		d.forks[f.Tid] = f.Pid
		d.pids = append(d.pids, f.Pid)
	case perfdata.RecordMmap:
		m, _, err := perfdata.ParseMmap(rec, sampleType)
		if err != nil {
			return err
		}
		d.kernel = append(d.kernel, m)
		d.pids = append(d.pids, m.Pid)
	case perfdata.RecordKsymbol:
		k, sid, err := perfdata.ParseKsymbol(rec, sampleType)
		if err != nil {
			return err
		}
		if k.Type != perfdata.KsymbolTypeBPF || k.Addr == 0 || k.Len == 0 || !strings.HasPrefix(k.Name, "bpf_") {
			return fmt.Errorf("unexpected KSYMBOL %+v", k)
		}
		d.pids = append(d.pids, sid.Pid)
	case perfdata.RecordBPFEvent:
		e, sid, err := perfdata.ParseBPFEvent(rec, sampleType)
		if err != nil {
			return err
		}
		if e.Type != perfdata.BPFEventProgLoad || e.ID == 0 {
			return fmt.Errorf("unexpected BPF_EVENT %+v", e)
		}
		d.pids = append(d.pids, sid.Pid)
	default:
		return fmt.Errorf("unexpected record type %d", typ)
	}
	return nil
}

// of returns the mappings of process pid.
func (d *dumped) of(pid int) []mapKey {
	var keys []mapKey
	for _, k := range d.maps {
		if k.pid == uint32(pid) {
			keys = append(keys, k)
		}
	}
	return keys
}

// sameMaps reports the difference between two mapping lists: entries
// missing from got, extra in got, and entries got holds twice.
func sameMaps(want, got []mapKey) []string {
	var diff []string
	count := map[mapKey]int{}
	for _, k := range got {
		count[k]++
		if count[k] == 2 {
			diff = append(diff, "twice: "+k.String())
		}
	}
	wantSet := map[mapKey]bool{}
	for _, k := range want {
		wantSet[k] = true
		if count[k] == 0 {
			diff = append(diff, "missing: "+k.String())
		}
	}
	for _, k := range got {
		if !wantSet[k] {
			diff = append(diff, "extra: "+k.String())
		}
	}
	return diff
}

// checkProc compares a dump with /proc/PID/maps and the task comms,
// read before and after it: the test process is idle, so they agree.
func checkProc(t *testing.T, p *testproc.Proc, d *dumped, data bool) {
	t.Helper()
	want := procKeys(t, p.Pid, data)
	if diff := sameMaps(want, d.of(p.Pid)); len(diff) > 0 {
		if len(diff) > 20 {
			diff = append(diff[:20], fmt.Sprintf("... %d more", len(diff)-20))
		}
		t.Errorf("pid %d: dump differs from /proc/%d/maps:\n%s", p.Pid, p.Pid, strings.Join(diff, "\n"))
	}
	comms, err := p.Comms()
	if err != nil {
		t.Fatal(err)
	}
	for tid, comm := range comms {
		if got, ok := d.comms[uint32(tid)]; !ok || got != comm {
			t.Errorf("tid %d: COMM %q, /proc says %q", tid, got, comm)
		}
		if tid == p.Pid {
			continue
		}
		if pid, ok := d.forks[uint32(tid)]; !ok || pid != uint32(p.Pid) {
			t.Errorf("tid %d: no FORK from process %d", tid, p.Pid)
		}
	}
}

var everything = testproc.Spec{
	LongPath: true, SpacePath: true, Deleted: true, Memfd: true, AnonExec: true,
	DataFile: true, ManyVMAs: 5000,
	Threads: []string{"synth-a", "synth b worker"},
}

// The test process's mappings, COMMs and FORKs are as /proc shows them,
// with the programs linked against the kernel's BTF (no KernelCache)
// and loaded from a kernel cache (which the first filled, where the
// kernel has a build ID).
func TestDumpMatchesProc(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, everything)
	cache := filepath.Join(t.TempDir(), "kcache")
	for _, tc := range []struct{ data, noCache bool }{{false, true}, {true, true}, {false, false}, {true, false}} {
		t.Run(fmt.Sprintf("data=%v/no-kernel-cache=%v", tc.data, tc.noCache), func(t *testing.T) {
			data := tc.data
			opts := synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Data: data, KernelCache: cache}
			if tc.noCache {
				opts.KernelCache = ""
			}
			d := runDump(t, opts)
			checkProc(t, p, d, data)
			if n := len(d.of(p.Pid)); data && n < 5000 {
				t.Errorf("only %d mappings with --data, want >= 5000", n)
			}
			checkMisc(t, d)
		})
	}
}

// Whatever method auto picks on this kernel (bpf, else a /proc method:
// on a kernel without iter/task_vma, such as 5.10), the test process's
// mappings, COMMs and FORKs are as /proc shows them, build IDs included.
func TestAutoMatchesProc(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, everything)
	for _, data := range []bool{false, true} {
		t.Run(fmt.Sprintf("data=%v", data), func(t *testing.T) {
			m, err := synth.OpenMethod(synth.MethodAuto, synth.MethodOptions{
				Options: synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Data: data}, Threads: 2,
				Fallback: func(method synth.MethodName, err error) { t.Logf("auto: not %s: %v", method, err) }})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
			d.stats, err = m.Dump(t.Context(), func(rec []byte) error { return d.add(rec, synth.DefaultSampleType) })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("auto chose %s", m.Name())
			checkProc(t, p, d, data)
			checkMisc(t, d)
		})
	}
}

// A file mapped at non-zero offsets has, in every walk and method, the
// page offset /proc/PID/maps gives it, on any page size: the programs
// count vm_pgoff in the running kernel's pages (16K or 64K on arm64),
// and a walk that shifted it by 4K's would write a quarter or a
// sixteenth of it there.
func TestPageOffsets(t *testing.T) {
	testenv.Root(t)
	page := int64(os.Getpagesize())
	path := filepath.Join(t.TempDir(), "offsets.bin")
	if err := os.WriteFile(path, make([]byte, 16*page), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.StartT(t, testproc.Spec{Maps: []testproc.MapSpec{
		{Path: path, Off: 3 * page, Len: 2 * page},
		{Path: path, Off: 11 * page, Len: page},
	}})
	want := map[uint64]bool{uint64(3 * page): true, uint64(11 * page): true}
	check := func(t *testing.T, d *dumped) {
		t.Helper()
		var got []uint64
		for _, k := range d.of(p.Pid) {
			if k.path == path || k.buildID == "" && strings.HasSuffix(k.path, "/offsets.bin") {
				got = append(got, k.pgoff)
			}
		}
		if len(got) != 2 || !want[got[0]] || !want[got[1]] {
			t.Errorf("page offsets %#x, want %#x and %#x (page size %d)", got, 3*page, 11*page, page)
		}
		checkProc(t, p, d, false)
	}
	for _, walk := range []synth.Walk{synth.WalkAuto, synth.WalkIter} {
		t.Run("bpf-"+walk.String(), func(t *testing.T) {
			check(t, runDump(t, synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Walk: walk, NoKernel: true}))
		})
	}
	for _, method := range []synth.MethodName{synth.MethodProcmaps, synth.MethodProcquery} {
		t.Run(method.String(), func(t *testing.T) {
			if method == synth.MethodProcquery {
				needProcquery(t)
			}
			m, err := synth.OpenMethod(method, synth.MethodOptions{Options: synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, NoKernel: true}, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
			if d.stats, err = m.Dump(t.Context(), func(rec []byte) error { return d.add(rec, synth.DefaultSampleType) }); err != nil {
				t.Fatal(err)
			}
			check(t, d)
		})
	}
}

// checkMisc checks the misc bits perf gives user maps: USER, MMAP_DATA
// on the non-executable ones, and MMAP_BUILD_ID on those with a build ID.
func checkMisc(t *testing.T, d *dumped) {
	t.Helper()
	for i, k := range d.maps {
		want := uint16(perfdata.MiscUser)
		if k.prot&4 == 0 {
			want |= perfdata.MiscMmapData
		}
		if k.buildID != "" {
			want |= perfdata.MiscMmapBuildID
		}
		if d.misc[i] != want {
			t.Errorf("%v: misc %#x, want %#x", k, d.misc[i], want)
		}
	}
}

// A whole-host dump holds the test processes exactly as a pid-scoped one,
// in perf's order, and loses nothing even with the smallest rings.
func TestDumpHost(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, everything)
	for _, pages := range []int{0, synth.MinRingPages} {
		t.Run(fmt.Sprintf("ring-pages=%d", pages), func(t *testing.T) {
			d := runDump(t, synth.Options{Data: true, RingPages: pages})
			checkProc(t, p, d, true)
			checkOrder(t, d)
			if d.stats.Processes < 2 || d.stats.Mappings < 5000 {
				t.Errorf("stats %+v: too few processes or mappings", d.stats)
			}
			t.Logf("%+v", d.stats)
		})
	}
}

// checkOrder checks perf's order: kernel maps first, then per process its
// COMM/FORK records and its MMAP2 records, pids ascending.
func checkOrder(t *testing.T, d *dumped) {
	t.Helper()
	if len(d.kernel) == 0 {
		t.Fatal("no kernel map")
	}
	k := d.kernel[0]
	if ref := strings.TrimPrefix(k.Filename, "[kernel.kallsyms]"); (ref != "_text" && ref != "_stext") || k.Pid != ^uint32(0) || k.Misc != perfdata.MiscKernel || k.Len == 0 {
		t.Errorf("kernel map %+v, want [kernel.kallsyms]_text (or _stext), pid -1, misc KERNEL", k)
	}
	// The kernel's records lead: its maps, then the BPF programs'.
	var nk int
	for i, typ := range d.types {
		switch typ {
		case perfdata.RecordMmap:
			if i >= len(d.kernel) {
				t.Fatalf("kernel map at record %d, after other records", i)
			}
			nk++
		case perfdata.RecordKsymbol, perfdata.RecordBPFEvent:
			if i != nk {
				t.Fatalf("BPF program record at record %d, after process records", i)
			}
			nk++
		}
	}
	var prev uint32
	sawMmap := map[uint32]bool{}
	for i, pid := range d.pids[nk:] {
		typ := d.types[nk+i]
		if pid < prev {
			t.Fatalf("record %d: pid %d after pid %d", i, pid, prev)
		}
		prev = pid
		if typ == perfdata.RecordMmap2 {
			sawMmap[pid] = true
		} else if sawMmap[pid] {
			t.Fatalf("record %d: type %d of pid %d after its MMAP2 records", i, typ, pid)
		}
	}
}

// A process of the target that exits before a dump is skipped; the
// others are dumped. A target that names a process already gone is
// refused, naming it.
func TestDumpGoneProcess(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, testproc.Spec{})
	gone := testproc.StartT(t, testproc.Spec{})
	gonePid := gone.Pid
	opts := synth.Options{Target: synth.Target{Pids: []int{gonePid, p.Pid}}}
	b, err := synth.NewBPF(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := gone.Stop(); err != nil {
		t.Fatal(err)
	}
	d := dumpWith(t, b, opts)
	if d.stats.Skipped != 1 {
		t.Errorf("skipped %d processes, want 1", d.stats.Skipped)
	}
	if slices.Contains(d.pids, uint32(gonePid)) {
		t.Errorf("records of exited process %d", gonePid)
	}
	checkProc(t, p, d, false)

	_, err = synth.OpenMethod(synth.MethodProcmaps, synth.MethodOptions{Options: opts})
	if !errors.Is(err, synth.ErrNoProcess) || !strings.Contains(err.Error(), strconv.Itoa(gonePid)) {
		t.Errorf("OpenMethod of a target naming exited process %d: %v; want ErrNoProcess naming it", gonePid, err)
	}
}

// Every process of the host whose maps can be read and do not change
// while the dump runs is in the dump exactly as /proc shows it.
func TestDumpHostMatchesProc(t *testing.T) {
	testenv.Root(t)
	testproc.StartT(t, everything)
	before := hostKeys(t)
	d := runDump(t, synth.Options{Data: true})
	checked := 0
	for pid, keys := range before {
		if !unchanged(pid, keys) {
			continue
		}
		checked++
		if diff := sameMaps(keys, d.of(pid)); len(diff) > 0 {
			t.Errorf("pid %d differs from /proc:\n%s", pid, strings.Join(diff[:min(len(diff), 10)], "\n"))
		}
	}
	if checked < len(before)/2 || checked < 3 {
		t.Errorf("only %d of %d processes were stable enough to check", checked, len(before))
	}
	t.Logf("%d processes checked against /proc", checked)
}

// hostKeys reads the mappings of every process of the host that can be
// read, by pid, and notes how much CPU time each has used.
func hostKeys(t *testing.T) map[int][]mapKey {
	t.Helper()
	pids, err := procfs.Pids()
	if err != nil {
		t.Fatal(err)
	}
	keys := map[int][]mapKey{}
	for _, pid := range pids {
		if k, ok := tryProcKeys(pid, true); ok {
			keys[pid] = k
			cpuAtStart.Store(pid, cpuTime(pid))
		}
	}
	return keys
}

// cpuAtStart holds the CPU time of each process when hostKeys read it.
var cpuAtStart sync.Map

// unchanged reports whether process pid was quiet since hostKeys: it
// still maps what keys say, and it used no CPU time meanwhile (a process
// that maps and unmaps in a loop can show the same maps twice). This
// process does not count: it maps the rings during dumps only.
func unchanged(pid int, keys []mapKey) bool {
	after, ok := tryProcKeys(pid, true)
	cpu, _ := cpuAtStart.Load(pid)
	return ok && slices.Equal(keys, after) && pid != os.Getpid() && cpu == cpuTime(pid)
}

// cpuTime returns utime+stime of process pid from /proc/PID/stat, or
// -1 when it cannot be read.
func cpuTime(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command name, which may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)  // field 14: utime
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15: stime
	return u + st
}

// tryProcKeys reads every mapping of a process that may be gone or
// unreadable. An anonymous mapping is named "//anon", as perf names it.
// With buildIDs, a mapping of a file with a GNU build ID is expected in
// build-ID form.
func tryProcKeys(pid int, buildIDs bool) ([]mapKey, bool) {
	maps, err := procfs.ReadMaps(pid)
	if err != nil || len(maps) == 0 {
		return nil, false // gone, unreadable, or a kernel thread
	}
	keys := make([]mapKey, 0, len(maps))
	for _, m := range maps {
		k := mapKey{pid: uint32(pid), start: m.Start, end: m.End, pgoff: m.Pgoff,
			prot: m.Prot, maj: m.Maj, min: m.Min, ino: m.Ino, path: m.Path}
		if m.Shared {
			k.shared = 1
		}
		if k.path == "" {
			k.path = "//anon"
		}
		if id := fileBuildID(pid, m); buildIDs && id != nil {
			k.buildID = hex.EncodeToString(id)
			k.maj, k.min, k.ino = 0, 0, 0
		}
		keys = append(keys, k)
	}
	return keys, true
}
