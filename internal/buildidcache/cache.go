package buildidcache

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/elfnote"
)

// DefaultMaxSize is the largest file Add copies: perf 6.1 has no limit;
// synth's keeps a corrupt or hostile table from filling the disk with
// one file.
const DefaultMaxSize = 2 << 30

// The modes of the files, as perf 6.1 leaves them: its copyfile()
// gives a copy 0755 (an elf, kallsyms); the vDSO it copies from its own
// temporary file, keeping that file's 0600.
const (
	fileMode = 0o755
	vdsoMode = 0o600
)

// Cache is a build-ID cache directory.
type Cache struct {
	Dir     string // the cache's root, created if missing
	MaxSize int64  // 0: DefaultMaxSize
	// Where the host's files are; tests point them elsewhere.
	Proc     string        // default /proc
	Kallsyms string        // default /proc/kallsyms
	Kernel   func() []byte // the running kernel's build ID; default buildid.Kernel
	VDSO     func() []byte // the vDSO image; default buildid.VDSOImage
}

// Status is what Add did with an entry.
type Status int

const (
	Added    Status = iota // copied in, and linked
	Present                // already there with its build ID
	Mismatch               // no file with the recorded build ID could be read: not cached
	Skipped                // not a file the cache holds (an anonymous or deleted one, a module)
)

// Stats counts what Fill did.
type Stats struct {
	Added, Present, Mismatch, Skipped, Failed int
	Errs                                      []error // of the Failed ones (at most a few)
}

// Fill adds every entry, counting what happened.
func (c *Cache) Fill(es []Entry) Stats {
	var st Stats
	for _, e := range es {
		s, err := c.Add(e)
		switch {
		case err != nil:
			st.Failed++
			if len(st.Errs) < 5 {
				st.Errs = append(st.Errs, err)
			}
		case s == Added:
			st.Added++
		case s == Present:
			st.Present++
		case s == Mismatch:
			st.Mismatch++
		case s == Skipped:
			st.Skipped++
		}
	}
	return st
}

// Add puts one entry in the cache.
func (c *Cache) Add(e Entry) (Status, error) {
	if len(e.BuildID) < 2 {
		return Skipped, nil
	}
	sid := hex.EncodeToString(e.BuildID)
	var dir, base string
	switch e.Name {
	case KernelName:
		dir, base = KernelName, "kallsyms"
	case VDSOName:
		dir, base = VDSOName, "vdso"
	default:
		rel, ok := cachePath(e.Name)
		if !ok {
			return Skipped, nil
		}
		dir, base = rel, "elf"
	}
	dir = path.Join(dir, sid)
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	file := path.Join(dir, base)
	status := Present
	if !present(root, file, e) {
		// The source first: no directory is made for a file that is
		// not cached.
		src, err := c.open(e)
		if errors.Is(err, errRestricted) {
			return Skipped, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", e.Name, err)
		}
		if src == nil {
			return Mismatch, nil
		}
		if err := mkdirs(root, dir); err != nil {
			src.Close()
			return 0, fmt.Errorf("%s: %w", e.Name, err)
		}
		err = c.install(root, dir, base, src, e.BuildID)
		src.Close()
		if errors.Is(err, errMismatch) {
			return Mismatch, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", e.Name, err)
		}
		status = Added
	}
	// The link, as perf's: .build-id/XX/REST -> ../../DIR. perf leaves
	// one that exists alone, even pointing elsewhere (the same build ID
	// cached under another name): so does Add, unless it leads nowhere
	// in the cache.
	linkDir := path.Join(".build-id", sid[:2])
	if err := mkdirs(root, linkDir); err != nil {
		return 0, fmt.Errorf("%s: %w", e.Name, err)
	}
	link := path.Join(linkDir, sid[2:])
	st, err := root.Lstat(link)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := root.Symlink("../../"+dir, link); err != nil && !errors.Is(err, fs.ErrExist) {
			return 0, fmt.Errorf("%s: %w", e.Name, err)
		}
		status = Added
	case err != nil:
		return 0, fmt.Errorf("%s: %w", e.Name, err)
	case st.Mode().Type() == fs.ModeSymlink && !resolves(root, link, base):
		tmp := link + ".tmp" + strconv.FormatUint(rand.Uint64(), 36)
		if err := root.Symlink("../../"+dir, tmp); err != nil {
			return 0, fmt.Errorf("%s: %w", e.Name, err)
		}
		if err := root.Rename(tmp, link); err != nil {
			root.Remove(tmp)
			return 0, fmt.Errorf("%s: %w", e.Name, err)
		}
		status = Added
	}
	return status, nil
}

// resolves reports whether the .build-id link leads to a file base
// beneath root, as perf follows it (build_id_cache__filename).
func resolves(root *os.Root, link, base string) bool {
	st, err := root.Stat(path.Join(link, base))
	return err == nil && st.Mode().IsRegular()
}

// cachePath returns an absolute, clean path without its leading slash,
// or false for a name that is not one: an anonymous mapping (//anon), a
// [name], a deleted file, a memfd, or one with . or .. in it.
func cachePath(name string) (string, bool) {
	if !strings.HasPrefix(name, "/") || strings.HasSuffix(name, " (deleted)") ||
		strings.HasPrefix(name, "/memfd:") || strings.ContainsRune(name, 0) || len(name) > 4096 {
		return "", false
	}
	rel := name[1:]
	for c := range strings.SplitSeq(rel, "/") {
		if c == "" || c == "." || c == ".." || len(c) > 255 {
			return "", false
		}
	}
	return rel, true
}

// mkdirs creates dir beneath root one level at a time, refusing a
// component that exists as anything but a directory (a symlink above
// all: the cache is not to be written through one).
func mkdirs(root *os.Root, dir string) error {
	p := ""
	for c := range strings.SplitSeq(dir, "/") {
		p = path.Join(p, c)
		err := root.Mkdir(p, 0o755)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		st, err := root.Lstat(p)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%s in the build-ID cache is a %v, not a directory: refused", p, st.Mode().Type())
		}
	}
	return nil
}

// present reports whether the cache holds e's file: kallsyms, which
// has no build ID, if it exists (as perf checks); any other if it has
// e's build ID.
func present(root *os.Root, file string, e Entry) bool {
	if e.Name == KernelName {
		st, err := root.Lstat(file)
		return err == nil && st.Mode().IsRegular()
	}
	return hasBuildID(root, file, e.BuildID)
}

// hasBuildID reports whether file beneath root is a regular file (not
// a symlink) with build ID id.
func hasBuildID(root *os.Root, file string, id []byte) bool {
	st, err := root.Lstat(file)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := root.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	return fileHasID(f, id)
}

// fileHasID reports whether the open regular file f has build ID id.
func fileHasID(f *os.File, id []byte) bool {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	got, err := elfnote.BuildID(f, st.Size())
	return err == nil && bytes.Equal(got, id)
}

// source is what Add copies from.
type source interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// fileSource is an open file.
type fileSource struct {
	*os.File
	size int64
}

func (f fileSource) Size() int64 { return f.size }

// bytesSource is an image in memory.
type bytesSource struct{ *bytes.Reader }

func (bytesSource) Close() error { return nil }

var (
	errMismatch   = errors.New("build ID mismatch")
	errRestricted = errors.New("kallsyms without addresses (kernel.kptr_restrict)")
)

// open opens what to copy for e: nil when none has its build ID.
func (c *Cache) open(e Entry) (source, error) {
	switch e.Name {
	case KernelName:
		kernel := c.Kernel
		if kernel == nil {
			kernel = buildid.Kernel
		}
		if !bytes.Equal(kernel(), e.BuildID) {
			return nil, nil // recorded on another kernel
		}
		name := c.Kallsyms
		if name == "" {
			name = "/proc/kallsyms"
		}
		b, err := readKallsyms(name, c.maxSize())
		if err != nil {
			return nil, err
		}
		return bytesSource{bytes.NewReader(b)}, nil
	case VDSOName:
		vdso := c.VDSO
		if vdso == nil {
			vdso = buildid.VDSOImage
		}
		img := vdso()
		if img == nil {
			return nil, nil
		}
		if id, err := elfnote.BuildID(bytes.NewReader(img), int64(len(img))); err != nil || !bytes.Equal(id, e.BuildID) {
			return nil, nil
		}
		return bytesSource{bytes.NewReader(img)}, nil
	}
	proc := c.Proc
	if proc == "" {
		proc = "/proc"
	}
	var names []string
	if e.Pid > 0 {
		// The process's root first: a lookup of a map_files entry waits
		// for the process's mmap lock, uninterruptibly once another
		// lookup of it waits (see package mapread), and the build ID
		// checked below makes either the file recorded. map_files is
		// for what the root no longer shows (deleted, replaced).
		pid := strconv.FormatUint(uint64(e.Pid), 10)
		names = append(names, proc+"/"+pid+"/root"+e.Name)
		if e.End > e.Start {
			names = append(names, fmt.Sprintf("%s/%s/map_files/%x-%x", proc, pid, e.Start, e.End))
		}
	}
	names = append(names, e.Name)
	var tooBig error
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		st, err := f.Stat()
		switch {
		case err != nil || !st.Mode().IsRegular():
		case st.Size() > c.maxSize():
			tooBig = fmt.Errorf("%s: %d bytes, over the limit of %d", name, st.Size(), c.maxSize())
		case fileHasID(f, e.BuildID):
			return fileSource{f, st.Size()}, nil
		}
		f.Close()
	}
	return nil, tooBig
}

func (c *Cache) maxSize() int64 {
	if c.MaxSize > 0 {
		return c.MaxSize
	}
	return DefaultMaxSize
}

// readKallsyms reads /proc/kallsyms; errRestricted when its addresses
// are hidden (kptr_restrict): perf does not cache those either.
func readKallsyms(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: over the limit of %d bytes", name, max)
	}
	addr, _, _ := bytes.Cut(b, []byte(" "))
	if len(bytes.Trim(addr, "0")) == 0 {
		return nil, errRestricted
	}
	return b, nil
}

// install copies src to dir/base beneath root through a temporary file,
// which it checks before renaming it into place.
func (c *Cache) install(root *os.Root, dir, base string, src source, id []byte) error {
	tmp := path.Join(dir, "."+base+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
	mode := os.FileMode(fileMode)
	if base == "vdso" {
		mode = vdsoMode
	}
	f, err := root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if err := f.Chmod(mode); err != nil { // whatever the umask, as perf's fchmod
		return err
	}
	if _, err := io.Copy(f, io.NewSectionReader(src, 0, src.Size())); err != nil {
		return err
	}
	if base != "kallsyms" && !fileHasID(f, id) {
		return errMismatch // changed while it was copied
	}
	if err := f.Close(); err != nil {
		return err
	}
	done = true
	if err := root.Rename(tmp, path.Join(dir, base)); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}
