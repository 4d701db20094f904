package kcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/synth-dev/synth/internal/elfnote"
)

// DefaultDir is where synth keeps its cache when it runs as root.
const DefaultDir = "/var/cache/synth"

// The caps on what Load reads: a file past them is a miss, not an
// allocation.
const (
	// MaxSize is the largest file Load reads.
	MaxSize = 4 << 20
	// MaxPrograms is the most programs a file holds.
	MaxPrograms = 64
	maxName     = 64 // bytes of a program's name
)

// The file's header (little-endian); the programs follow it, then the
// SHA-256 of everything before the sum.
const (
	magic      = "synthkc\n"
	version    = 3
	maxBuildID = 64 // the kernel's build ID, padded with zeros
	offVersion = 8
	offIDLen   = 12
	offID      = 16
	offBTFSize = offID + maxBuildID // 80
	offObject  = offBTFSize + 8     // 88
	offCount   = offObject + 32     // 120
	headerSize = offCount + 4       // 124
)

// ErrMiss is wrapped by every error of Load that means "no usable
// entry": the caller links the programs afresh.
var ErrMiss = errors.New("no usable kernel cache entry")

// Key is what an entry is valid for.
type Key struct {
	Kernel  []byte   // the kernel's GNU build ID
	BTFSize int64    // the size of /sys/kernel/btf/vmlinux
	Object  [32]byte // SHA-256 of the BPF object
}

// Program is one program of the object as linked against the kernel.
type Program struct {
	// Code is the instructions as the kernel is given them (8 bytes
	// each, the machine's byte order), with the file descriptor of
	// every map load zero.
	Code []byte
	// AttachID is the kernel's BTF ID of the attach target (an
	// iterator's bpf_iter_ function); 0 for a program without one.
	AttachID uint32
	// BTF is the program's own BTF as the kernel is given it (its
	// functions and their types, marshaled for this kernel's BTF
	// features), and FuncInfo and LineInfo the bpf_func_info and
	// bpf_line_info records that point into it; all three may be empty.
	BTF, FuncInfo, LineInfo []byte
}

// Paths the key is read from; tests point them elsewhere.
var (
	kernelNotes = "/sys/kernel/notes"
	vmlinuxBTF  = "/sys/kernel/btf/vmlinux"
)

// CurrentKey returns the key of the running kernel for the BPF object
// whose SHA-256 is object. A kernel without a build ID, or without BTF,
// has no key: nothing is cached for it.
func CurrentKey(object [32]byte) (Key, error) {
	k := Key{Object: object}
	notes, err := os.ReadFile(kernelNotes)
	if err != nil {
		return Key{}, fmt.Errorf("kernel build ID: %w", err)
	}
	k.Kernel = elfnote.FromNotes(notes, binary.NativeEndian) // the kernel's own order
	if len(k.Kernel) == 0 || len(k.Kernel) > maxBuildID {
		return Key{}, fmt.Errorf("kernel build ID: none in %s", kernelNotes)
	}
	st, err := os.Stat(vmlinuxBTF)
	if err != nil {
		return Key{}, fmt.Errorf("kernel BTF: %w", err)
	}
	k.BTFSize = st.Size()
	return k, nil
}

// Cache is a cache directory that Open checked.
type Cache struct {
	dir string
}

// Open returns the cache in dir, creating dir (mode 0700) if it does
// not exist. It refuses a dir that is not a directory, is owned by
// another user than the effective one, or that its group or others can
// reach.
func Open(dir string) (*Cache, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if err := owned(st, true); err != nil {
		return nil, fmt.Errorf("cache directory %s: %w", dir, err)
	}
	return &Cache{dir: dir}, nil
}

// owned says why st is not a file (dir: a directory) of the effective
// user that no one else can write (dir: reach), or nil.
func owned(st os.FileInfo, dir bool) error {
	switch {
	case dir && !st.IsDir():
		return errors.New("not a directory")
	case !dir && !st.Mode().IsRegular():
		return errors.New("not a regular file")
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return errors.New("owned by another user")
	}
	perm := st.Mode().Perm()
	if dir && perm&0o077 != 0 || !dir && perm&0o022 != 0 {
		return fmt.Errorf("mode %#o: open to others", uint32(perm))
	}
	return nil
}

// path is the file of the entries for object.
func (c *Cache) path(object [32]byte) string {
	return filepath.Join(c.dir, "programs-"+hex.EncodeToString(object[:8]))
}

// Load returns the programs kept for k, by name. An entry of another
// kernel or object, or that fails a check, is an error wrapping
// ErrMiss.
func (c *Cache) Load(k Key) (map[string]Program, error) {
	f, err := os.Open(c.path(k.Object))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMiss, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMiss, err)
	}
	if err := owned(st, false); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMiss, f.Name(), err)
	}
	if st.Size() > MaxSize {
		return nil, fmt.Errorf("%w: %s: %d bytes, more than %d", ErrMiss, f.Name(), st.Size(), MaxSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMiss, err)
	}
	progs, err := decode(b, k)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMiss, f.Name(), err)
	}
	return progs, nil
}

// decode checks b, a whole file, against k and returns its programs.
func decode(b []byte, k Key) (map[string]Program, error) {
	le := binary.LittleEndian
	if len(b) < headerSize+sha256.Size || len(b) > MaxSize {
		return nil, fmt.Errorf("%d bytes", len(b))
	}
	body := b[:len(b)-sha256.Size]
	sum := sha256.Sum256(body)
	switch {
	case string(b[:len(magic)]) != magic:
		return nil, errors.New("not a synth kernel cache file")
	case le.Uint32(b[offVersion:]) != version:
		return nil, fmt.Errorf("version %d, not %d", le.Uint32(b[offVersion:]), version)
	case !bytes.Equal(sum[:], b[len(body):]):
		return nil, errors.New("checksum mismatch")
	}
	n := le.Uint32(b[offIDLen:])
	switch {
	case n > maxBuildID || !bytes.Equal(b[offID:offID+n], k.Kernel):
		return nil, fmt.Errorf("of another kernel (build ID %x)", b[offID:offID+min(n, maxBuildID)])
	case int64(le.Uint64(b[offBTFSize:])) != k.BTFSize:
		return nil, fmt.Errorf("of another kernel BTF (%d bytes)", le.Uint64(b[offBTFSize:]))
	case !bytes.Equal(b[offObject:offObject+32], k.Object[:]):
		return nil, errors.New("of another BPF object")
	}
	count := le.Uint32(b[offCount:])
	if count > MaxPrograms {
		return nil, fmt.Errorf("%d programs, more than %d", count, MaxPrograms)
	}
	progs := make(map[string]Program, count)
	rest := body[headerSize:]
	for range count {
		name, p, r, err := decodeProgram(rest)
		if err != nil {
			return nil, err
		}
		progs[name] = p
		rest = r
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the programs", len(rest))
	}
	return progs, nil
}

// decodeProgram decodes the program at the start of b: its name's
// length (2 bytes) and name, attach ID (4), then code, BTF, func info
// and line info, each its length (4) and bytes. It returns what follows
// it.
func decodeProgram(b []byte) (string, Program, []byte, error) {
	le := binary.LittleEndian
	if len(b) < 2 {
		return "", Program{}, nil, errors.New("truncated program")
	}
	n := int(le.Uint16(b))
	if n == 0 || n > maxName || len(b) < 2+n+4 {
		return "", Program{}, nil, errors.New("truncated program name")
	}
	name := string(b[2 : 2+n])
	b = b[2+n:]
	p := Program{AttachID: le.Uint32(b)}
	b = b[4:]
	for _, f := range []*[]byte{&p.Code, &p.BTF, &p.FuncInfo, &p.LineInfo} {
		if len(b) < 4 || uint64(le.Uint32(b)) > uint64(len(b)-4) {
			return "", Program{}, nil, fmt.Errorf("program %s: truncated", name)
		}
		size := le.Uint32(b)
		if size > 0 {
			*f = bytes.Clone(b[4 : 4+size])
		}
		b = b[4+size:]
	}
	if len(p.Code) == 0 || len(p.Code)%8 != 0 {
		return "", Program{}, nil, fmt.Errorf("program %s: %d bytes of code", name, len(p.Code))
	}
	return name, p, b, nil
}

// encode returns the file for progs under k.
func encode(k Key, progs map[string]Program) ([]byte, error) {
	if len(k.Kernel) == 0 || len(k.Kernel) > maxBuildID {
		return nil, fmt.Errorf("kernel build ID of %d bytes", len(k.Kernel))
	}
	if len(progs) > MaxPrograms {
		return nil, fmt.Errorf("%d programs, more than %d", len(progs), MaxPrograms)
	}
	le := binary.LittleEndian
	b := make([]byte, headerSize)
	copy(b, magic)
	le.PutUint32(b[offVersion:], version)
	le.PutUint32(b[offIDLen:], uint32(len(k.Kernel)))
	copy(b[offID:], k.Kernel)
	le.PutUint64(b[offBTFSize:], uint64(k.BTFSize))
	copy(b[offObject:], k.Object[:])
	le.PutUint32(b[offCount:], uint32(len(progs)))
	for _, name := range slices.Sorted(maps.Keys(progs)) {
		p := progs[name]
		if name == "" || len(name) > maxName || len(p.Code) == 0 || len(p.Code)%8 != 0 {
			return nil, fmt.Errorf("program %q of %d bytes", name, len(p.Code))
		}
		b = le.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = le.AppendUint32(b, p.AttachID)
		for _, f := range [][]byte{p.Code, p.BTF, p.FuncInfo, p.LineInfo} {
			if len(f) > MaxSize {
				return nil, fmt.Errorf("program %s: %d bytes", name, len(f))
			}
			b = le.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
	}
	sum := sha256.Sum256(b)
	b = append(b, sum[:]...)
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), MaxSize)
	}
	return b, nil
}

// Store writes progs as the entry for k, replacing the file of k's
// object whole: a temporary file renamed into place.
func (c *Cache) Store(k Key, progs map[string]Program) error {
	b, err := encode(k, progs)
	if err != nil {
		return fmt.Errorf("store kernel cache: %w", err)
	}
	f, err := os.CreateTemp(c.dir, ".programs-*")
	if err != nil {
		return fmt.Errorf("store kernel cache: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.path(k.Object))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("store kernel cache: %w", err)
	}
	return nil
}
