package profconv

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/synth"
)

// kernelDSO is the name perf gives the kernel's mapping.
const kernelDSO = "[kernel.kallsyms]"

// mapKey is a mapping as its process had it: one per range and file.
type mapKey struct {
	path              string
	start, end, pgoff uint64
	buildID           string
	maj, min          uint32
	ino               uint64
	kind              synth.LocationKind
}

// mapping is a mapping of the profile, with what was found of its file.
type mapping struct {
	mapKey
	buildID []byte // GNU, from the record, the build-ID section or the file
	goID    string // Go's, from the file
	htlhash string // from the file, when it is the one recorded
	syms    *symtab
}

// mappingOf interns the mapping of loc.
func (c *Converter) mappingOf(loc *synth.Location) int {
	m := &loc.Mapping
	k := mapKey{path: m.Path, start: m.Start, end: m.End, pgoff: m.Pgoff, buildID: string(m.BuildID),
		maj: m.Maj, min: m.Min, ino: m.Ino, kind: loc.Kind}
	if i, ok := c.mapIndex[k]; ok {
		return i
	}
	c.maps = append(c.maps, &mapping{mapKey: k})
	c.mapIndex[k] = len(c.maps) - 1
	return len(c.maps) - 1
}

func (c *Converter) kernelMapIndex() int {
	if c.kernelMap < 0 {
		c.maps = append(c.maps, &mapping{mapKey: mapKey{path: kernelDSO, kind: synth.LocationKernel}})
		c.kernelMap = len(c.maps) - 1
	}
	return c.kernelMap
}

func (c *Converter) kernelMapping() *mapping { return c.maps[c.kernelMapIndex()] }

// finish identifies and symbolizes the mappings, once: the build-ID
// section of a pipe comes after its samples.
func (c *Converter) finish() {
	if c.finished {
		return
	}
	c.finished = true
	sameKernel := c.recordedHere()
	var ksyms *symtab
	if sameKernel && !c.opts.NoSymbolize {
		ksyms = readKallsyms(cmpOr(c.opts.Kallsyms, "/proc/kallsyms"))
	}
	files := map[mapKey]*fileInfo{}
	c.local = newLocalFiles()
	for _, m := range c.maps {
		c.stats.Mappings++
		switch m.kind {
		case synth.LocationKernel:
			m.buildID = c.kernelID
			if m.buildID == nil && sameKernel {
				m.buildID = buildid.Kernel()
			}
			m.syms = ksyms
		case synth.LocationFile:
			c.identify(m, files)
		case synth.LocationVDSO:
			m.buildID = c.fileIDs[m.path]
		}
		if m.syms != nil {
			c.stats.Symbolized++
		}
		if m.buildID == nil && m.kind != synth.LocationAnon {
			c.stats.NoBuildID++
		}
	}
}

// recordedHere reports whether the file was recorded on the running
// kernel: its kernel build ID is this kernel's, or without one its
// host name and release are this host's.
func (c *Converter) recordedHere() bool {
	if c.kernelID != nil {
		return bytes.Equal(c.kernelID, buildid.Kernel())
	}
	var u syscall.Utsname
	if c.hostname == "" || syscall.Uname(&u) != nil {
		return false
	}
	return c.hostname == utsString(u.Nodename[:]) && c.osrel == utsString(u.Release[:])
}

func utsString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// fileInfo is what was read of a file at hand.
type fileInfo struct {
	ok      bool // it is the file the record names
	buildID []byte
	goID    string
	htlhash string
	syms    *symtab
}

// identify gives a file's mapping its build ID: the record's, else
// the build-ID section's for its name, else the file's at hand when
// its inode is the record's. The file at hand lends its symbols and
// htlhash only when it is provably the one mapped: the same build ID,
// or with none recorded the same device and inode. A file replaced
// since gives nothing, and is counted.
func (c *Converter) identify(m *mapping, files map[mapKey]*fileInfo) {
	if m.mapKey.buildID != "" {
		m.buildID = []byte(m.mapKey.buildID)
	} else if id, ok := c.fileIDs[m.path]; ok {
		m.buildID = id
	}
	fk := mapKey{path: m.path, buildID: string(m.buildID), maj: m.maj, min: m.min, ino: m.ino}
	fi, ok := files[fk]
	if !ok {
		fi = c.readFile(m)
		files[fk] = fi
	}
	if fi == nil {
		return
	}
	if !fi.ok {
		c.stats.WrongFile++
		return
	}
	if m.buildID == nil {
		m.buildID = fi.buildID
	}
	m.goID, m.htlhash, m.syms = fi.goID, fi.htlhash, fi.syms
}

// readFile reads the file of m at hand; nil when it cannot be read.
func (c *Converter) readFile(m *mapping) *fileInfo {
	if c.opts.NoSymbolize || !c.local.local(m.path) {
		return nil
	}
	f, err := os.OpenFile(m.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	id, _ := elfnote.BuildID(f, st.Size())
	fi := &fileInfo{buildID: id}
	switch {
	case m.buildID != nil:
		fi.ok = id != nil && bytes.Equal(id, m.buildID)
	case m.ino != 0:
		sys, _ := st.Sys().(*syscall.Stat_t)
		fi.ok = sys != nil && sys.Ino == m.ino && devMajor(sys.Dev) == m.maj && devMinor(sys.Dev) == m.min
	}
	if !fi.ok {
		return fi
	}
	fi.htlhash = htlhash(f, st.Size())
	if ef, err := elf.NewFile(f); err == nil {
		fi.goID = goBuildID(ef)
		fi.syms = elfSymbols(ef)
		ef.Close()
	}
	return fi
}

// devMajor and devMinor split a dev_t as the kernel's new_encode_dev.
func devMajor(dev uint64) uint32 { return uint32((dev>>8)&0xfff | (dev>>32)&^0xfff) }
func devMinor(dev uint64) uint32 { return uint32(dev&0xff | (dev>>12)&^0xff) }

// htlhash is process.executable.build_id.htlhash as OpenTelemetry's
// profiles define it: the first 16 bytes of the SHA-256 of the file's
// first 4096 bytes, its last 4096 (which may overlap them), and its
// length as a big-endian u64, in hex.
func htlhash(r io.ReaderAt, size int64) string {
	h := sha256.New()
	head := make([]byte, min(size, 4096))
	tail := make([]byte, min(size, 4096))
	if _, err := r.ReadAt(head, 0); err != nil {
		return ""
	}
	if _, err := r.ReadAt(tail, size-int64(len(tail))); err != nil {
		return ""
	}
	h.Write(head)
	h.Write(tail)
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(size)))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// goBuildID reads Go's build ID from the .note.go.buildid section:
// a note named "Go" of type 4.
func goBuildID(f *elf.File) string {
	s := f.Section(".note.go.buildid")
	if s == nil || s.Size > 1<<10 {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		return ""
	}
	bo := f.ByteOrder
	nsz, dsz, typ := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
	off := 12 + (int(nsz)+3)&^3
	if typ != 4 || nsz != 4 || string(b[12:14]) != "Go" || off+int(dsz) > len(b) {
		return ""
	}
	return string(b[off : off+int(dsz)])
}

// symtab is a sorted table of function symbols, and how a file offset
// turns into the addresses they are at.
type symtab struct {
	syms  []sym
	loads []elf.ProgHeader // PT_LOAD, for file offsets; none for kallsyms
}

type sym struct {
	addr, size uint64
	name       string
}

// elfSymbols reads the function symbols of .symtab and .dynsym, as
// perf report does without debug info.
func elfSymbols(f *elf.File) *symtab {
	t := &symtab{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			t.loads = append(t.loads, p.ProgHeader)
		}
	}
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		ss, _ := read()
		for _, s := range ss {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Section != elf.SHN_UNDEF {
				t.syms = append(t.syms, sym{s.Value, s.Size, s.Name})
			}
		}
	}
	if len(t.syms) == 0 {
		return nil
	}
	t.sort()
	return t
}

func (t *symtab) sort() {
	sort.SliceStable(t.syms, func(i, j int) bool { return t.syms[i].addr < t.syms[j].addr })
}

// lookup names the function at address a (a file's ELF address, or
// the kernel's).
func (t *symtab) lookup(a uint64) string {
	i := sort.Search(len(t.syms), func(i int) bool { return t.syms[i].addr > a }) - 1
	if i < 0 {
		return ""
	}
	s := t.syms[i]
	if s.size != 0 && a >= s.addr+s.size {
		return ""
	}
	return s.name
}

// fileAddr turns an offset in the file into its ELF address, by the
// PT_LOAD segment that holds it.
func (t *symtab) fileAddr(off uint64) (uint64, bool) {
	for _, p := range t.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// name names the function at address addr of mapping m.
func (m *mapping) name(addr uint64) string {
	if m.syms == nil {
		return ""
	}
	if m.kind == synth.LocationKernel {
		return m.syms.lookup(addr)
	}
	a, ok := m.syms.fileAddr(addr - m.start + m.pgoff)
	if !ok {
		return ""
	}
	return m.syms.lookup(a)
}

// localFiles tells which paths lie on a local filesystem, by this
// process's mount table: the mount point that is the longest prefix of
// the path. A file on FUSE or a network filesystem is not opened, as
// the dump does not read one in-process: its open or read may block
// for ever.
type localFiles struct {
	points map[string]string // mount point: filesystem type
}

func newLocalFiles() *localFiles {
	lf := &localFiles{points: map[string]string{}}
	pts, err := procfs.ReadMountPoints()
	if err != nil {
		return lf
	}
	types, _ := procfs.ReadMountTypes(0)
	for dev, ps := range pts {
		for _, p := range ps {
			lf.points[p] = types[dev]
		}
	}
	return lf
}

func (lf *localFiles) local(path string) bool {
	best, typ := -1, ""
	for p, t := range lf.points {
		if len(p) > best && (p == "/" || path == p || strings.HasPrefix(path, p+"/")) {
			best, typ = len(p), t
		}
	}
	return best >= 0 && buildid.LocalFS(typ)
}
