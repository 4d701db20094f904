package kcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/synth-dev/synth/internal/elfnote"
)

// DefaultDir is where the synth command keeps its cache when it runs
// as root; the library keeps one only where Options.KernelCache says.
const DefaultDir = "/var/cache/synth"

// The caps on what Load reads: a file past them is a miss, not an
// allocation.
const (
	// MaxSize is the largest file Load reads.
	MaxSize = 4 << 20
	maxName = 64 // bytes of a program's name
)

// The file's header (little-endian); the program follows it, then the
// SHA-256 of everything before the sum.
const (
	magic      = "synthkc\n"
	version    = 4
	maxBuildID = 64 // the kernel's build ID, padded with zeros
	offVersion = 8
	offIDLen   = 12
	offID      = 16
	offBTFSize = offID + maxBuildID // 80
	offObject  = offBTFSize + 8     // 88
	headerSize = offObject + 32     // 120
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

// The names of the cache's files: programs-HASH-NAME, and the
// temporary .programs-* a Store writes first.
const (
	filePrefix = "programs-"
	tempPrefix = ".programs-"
)

// path is the file of the program name for object.
func (c *Cache) path(object [32]byte, name string) string {
	return filepath.Join(c.dir, filePrefix+objectHash(object)+"-"+name)
}

func objectHash(object [32]byte) string { return hex.EncodeToString(object[:8]) }

// MaxAge is how long Prune keeps the files of another object after
// they were stored.
const MaxAge = 7 * 24 * time.Hour

// Prune removes the cache's files, entries and temporary files left by
// a Store that died, of objects other than object that were written
// before now-maxAge. The files of object stay whatever their age (a
// kernel's update replaces them), and so do another object's written
// since: two synth builds in use on one host do not evict each other,
// while each rebuild's files (a megabyte) go a week after its last
// store. Files that are not the cache's are left alone. It returns the
// number of files removed and the first error.
func (c *Cache) Prune(object [32]byte, now time.Time, maxAge time.Duration) (int, error) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return 0, fmt.Errorf("prune kernel cache: %w", err)
	}
	own := filePrefix + objectHash(object) + "-"
	var n int
	var first error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, filePrefix) && !strings.HasPrefix(name, tempPrefix) || strings.HasPrefix(name, own) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || !info.ModTime().Before(now.Add(-maxAge)) {
			continue
		}
		if err := os.Remove(filepath.Join(c.dir, name)); err != nil {
			if first == nil {
				first = fmt.Errorf("prune kernel cache: %w", err)
			}
			continue
		}
		n++
	}
	return n, first
}

// validName reports whether name may name a file of the cache: what
// the kernel takes as a program's name, and not empty.
func validName(name string) bool {
	if name == "" || len(name) > maxName {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return name != "." && name != ".."
}

// Load returns the program name kept for k. An entry of another kernel
// or object, or that fails a check, is an error wrapping ErrMiss.
func (c *Cache) Load(k Key, name string) (Program, error) {
	if !validName(name) {
		return Program{}, fmt.Errorf("%w: program name %q", ErrMiss, name)
	}
	// Not through a link (to a file someone else chose), nor waiting
	// for the writer of a FIFO: owned then refuses whatever is not a
	// regular file.
	f, err := os.OpenFile(c.path(k.Object, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Program{}, fmt.Errorf("%w: %w", ErrMiss, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Program{}, fmt.Errorf("%w: %w", ErrMiss, err)
	}
	if err := owned(st, false); err != nil {
		return Program{}, fmt.Errorf("%w: %s: %w", ErrMiss, f.Name(), err)
	}
	if st.Size() > MaxSize {
		return Program{}, fmt.Errorf("%w: %s: %d bytes, more than %d", ErrMiss, f.Name(), st.Size(), MaxSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return Program{}, fmt.Errorf("%w: %w", ErrMiss, err)
	}
	p, err := decode(b, k, name)
	if err != nil {
		return Program{}, fmt.Errorf("%w: %s: %w", ErrMiss, f.Name(), err)
	}
	return p, nil
}

// decode checks b, a whole file, against k and name and returns its
// program.
func decode(b []byte, k Key, name string) (Program, error) {
	le := binary.LittleEndian
	if len(b) < headerSize+sha256.Size || len(b) > MaxSize {
		return Program{}, fmt.Errorf("%d bytes", len(b))
	}
	body := b[:len(b)-sha256.Size]
	sum := sha256.Sum256(body)
	switch {
	case string(b[:len(magic)]) != magic:
		return Program{}, errors.New("not a synth kernel cache file")
	case le.Uint32(b[offVersion:]) != version:
		return Program{}, fmt.Errorf("version %d, not %d", le.Uint32(b[offVersion:]), version)
	case !bytes.Equal(sum[:], b[len(body):]):
		return Program{}, errors.New("checksum mismatch")
	}
	n := le.Uint32(b[offIDLen:])
	switch {
	case n > maxBuildID || !bytes.Equal(b[offID:offID+n], k.Kernel):
		return Program{}, fmt.Errorf("of another kernel (build ID %x)", b[offID:offID+min(n, maxBuildID)])
	case int64(le.Uint64(b[offBTFSize:])) != k.BTFSize:
		return Program{}, fmt.Errorf("of another kernel BTF (%d bytes)", le.Uint64(b[offBTFSize:]))
	case !bytes.Equal(b[offObject:offObject+32], k.Object[:]):
		return Program{}, errors.New("of another BPF object")
	}
	got, p, rest, err := decodeProgram(body[headerSize:])
	switch {
	case err != nil:
		return Program{}, err
	case got != name:
		return Program{}, fmt.Errorf("of program %q", got)
	case len(rest) != 0:
		return Program{}, fmt.Errorf("%d bytes after the program", len(rest))
	}
	return p, nil
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

// encode returns the file for the program name under k.
func encode(k Key, name string, p Program) ([]byte, error) {
	if len(k.Kernel) == 0 || len(k.Kernel) > maxBuildID {
		return nil, fmt.Errorf("kernel build ID of %d bytes", len(k.Kernel))
	}
	if !validName(name) || len(p.Code) == 0 || len(p.Code)%8 != 0 {
		return nil, fmt.Errorf("program %q of %d bytes", name, len(p.Code))
	}
	le := binary.LittleEndian
	b := make([]byte, headerSize)
	copy(b, magic)
	le.PutUint32(b[offVersion:], version)
	le.PutUint32(b[offIDLen:], uint32(len(k.Kernel)))
	copy(b[offID:], k.Kernel)
	le.PutUint64(b[offBTFSize:], uint64(k.BTFSize))
	copy(b[offObject:], k.Object[:])
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
	sum := sha256.Sum256(b)
	b = append(b, sum[:]...)
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), MaxSize)
	}
	return b, nil
}

// Store writes p as the program name for k, replacing its file whole:
// a temporary file renamed into place.
func (c *Cache) Store(k Key, name string, p Program) error {
	b, err := encode(k, name, p)
	if err != nil {
		return fmt.Errorf("store kernel cache: %w", err)
	}
	f, err := os.CreateTemp(c.dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("store kernel cache: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.path(k.Object, name))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("store kernel cache: %w", err)
	}
	return nil
}
