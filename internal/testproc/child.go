package testproc

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Main becomes the helper process when the test binary was started by
// Start, and returns at once otherwise.
func Main() {
	js, ok := os.LookupEnv(envSpec)
	if !ok {
		return
	}
	var spec Spec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		fail(err)
	}
	c := &child{spec: spec}
	if err := c.setUp(); err != nil {
		fail(err)
	}
	for _, f := range c.files {
		fmt.Printf("file %s\n", f)
	}
	if spec.ZombieLeader {
		go func() {
			awaitZombie()
			c.serve()
		}()
		// The main goroutine runs on the leader (see init): it alone
		// exits, with exit(2), not exit_group(2).
		unix.Syscall(unix.SYS_EXIT, 0, 0, 0)
	}
	c.serve()
}

// serve says the helper is ready and runs commands until the parent
// closes stdin, then exits.
func (c *child) serve() {
	fmt.Println("ready")
	if c.spec.Churn {
		c.pause = make(chan chan struct{})
		go c.churn()
	}
	// Commands until the parent closes stdin.
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if err := c.command(sc.Text()); err != nil {
			fmt.Printf("error %v\n", err)
			continue
		}
		fmt.Println("ok")
	}
	runtime.KeepAlive(c)
	os.Exit(0)
}

// command runs one line of Proc.Poke: "poke I OFF HEX PROTECT" writes
// the bytes HEX at OFF in the mapping of Spec.Maps[I]; with PROTECT 1,
// the page is made writable first and read-execute again after.
func (c *child) command(line string) error {
	if path, ok := strings.CutPrefix(line, "map "); ok {
		return c.mapLater(path)
	}
	if line == "unmap" {
		return c.unmapLater()
	}
	if line == "move" || line == "shrink" {
		return c.remapLater(line == "move")
	}
	if line == "noexec" {
		if len(c.later) == 0 {
			return errors.New("noexec: nothing mapped with map")
		}
		return unix.Mprotect(c.later[len(c.later)-1][:page], unix.PROT_READ)
	}
	if line == "pause" {
		return c.pauseChurn()
	}
	var n int
	if _, err := fmt.Sscanf(line, "below %d", &n); err == nil {
		return c.below(n)
	}
	var i, off, protect int
	var h string
	if _, err := fmt.Sscanf(line, "poke %d %d %s %d", &i, &off, &h, &protect); err != nil {
		return fmt.Errorf("command %q: %w", line, err)
	}
	data, err := hex.DecodeString(h)
	if err != nil || i < 0 || i >= len(c.existing) {
		return fmt.Errorf("command %q: bad arguments", line)
	}
	m := c.existing[i]
	if off < 0 || off+len(data) > len(m) {
		return fmt.Errorf("poke [%d, +%d) outside a %d-byte mapping", off, len(data), len(m))
	}
	pg := m[off&^(page-1) : (off+len(data)+page-1)&^(page-1)]
	if protect == 1 {
		if err := unix.Mprotect(pg, unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return err
		}
	}
	copy(m[off:], data)
	if protect == 1 {
		return unix.Mprotect(pg, unix.PROT_READ|unix.PROT_EXEC)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "testproc:", err)
	os.Exit(2)
}

// child holds the mappings so they stay alive.
type child struct {
	spec     Spec
	maps     [][]byte
	existing [][]byte           // the mappings of Spec.Maps, in order
	later    [][]byte           // the mappings of command "map" still mapped
	pause    chan chan struct{} // asks the churn to stop changing anything
	files    []string
}

// page is the kernel's page size: file offsets of mappings are multiples of it.
var page = os.Getpagesize()

func (c *child) setUp() error {
	s := c.spec
	steps := []struct {
		on bool
		fn func() error
	}{
		{s.LongPath, c.longPath},
		{s.MaxPath, c.maxPath},
		{s.SpacePath, func() error {
			return c.mapFile(filepath.Join(s.Dir, "dir with spaces", "lib with spaces.so"), 4, unix.PROT_READ|unix.PROT_EXEC, false)
		}},
		{s.Deleted, c.deleted},
		{s.Memfd, c.memfd},
		{s.AnonExec, c.anonExec},
		{s.DataFile, c.dataFile},
		{s.ManyVMAs > 0, c.manyVMAs},
		{len(s.Threads) > 0, c.threads},
		{len(s.Maps) > 0, c.mapExisting},
	}
	for _, st := range steps {
		if !st.on {
			continue
		}
		if err := st.fn(); err != nil {
			return err
		}
	}
	return nil
}

// writeFile creates a file of n pages of a byte pattern.
func writeFile(path string, n int) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n*page)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// mapFile maps the whole of a new file of n pages with prot.
func (c *child) mapFile(path string, n, prot int, shared bool) error {
	f, err := writeFile(path, n)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := unix.MAP_PRIVATE
	if shared {
		flags = unix.MAP_SHARED
	}
	m, err := unix.Mmap(int(f.Fd()), 0, n*page, prot, flags)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", path, err)
	}
	c.maps = append(c.maps, m)
	c.files = append(c.files, path)
	return nil
}

func (c *child) longPath() error {
	dir := c.spec.Dir
	for i := 0; len(dir) < 320; i++ {
		dir = filepath.Join(dir, fmt.Sprintf("%02d-%s", i, strings.Repeat("long", 20)))
	}
	path := filepath.Join(dir, "long-path-lib.so")
	f, err := writeFile(path, 4)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, off := range []int64{0, int64(page)} {
		m, err := unix.Mmap(int(f.Fd()), off, page, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
		if err != nil {
			return fmt.Errorf("mmap long path: %w", err)
		}
		c.maps = append(c.maps, m)
	}
	c.files = append(c.files, path)
	return nil
}

// maxPath maps a file whose absolute path is 4095 bytes long: with its
// NUL, the most d_path and PATH_MAX allow.
func (c *child) maxPath() error {
	dir := c.spec.Dir
	for rem := 4095 - len(dir) - 1; rem > 255; rem = 4095 - len(dir) - 1 {
		dir = filepath.Join(dir, strings.Repeat("p", min(200, rem-1-60)))
	}
	path := filepath.Join(dir, strings.Repeat("m", 4095-len(dir)-1-3)+".so")
	if len(path) != 4095 {
		return fmt.Errorf("max path: %d bytes, want 4095", len(path))
	}
	return c.mapFile(path, 1, unix.PROT_READ|unix.PROT_EXEC, false)
}

func (c *child) deleted() error {
	path := filepath.Join(c.spec.Dir, "deleted-lib.so")
	if err := c.mapFile(path, 2, unix.PROT_READ|unix.PROT_EXEC, false); err != nil {
		return err
	}
	return os.Remove(path)
}

func (c *child) memfd() error {
	fd, err := unix.MemfdCreate("synth-test", 0)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(4*page)); err != nil {
		return err
	}
	m, err := unix.Mmap(fd, 0, 4*page, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap memfd: %w", err)
	}
	c.maps = append(c.maps, m)
	c.files = append(c.files, "/memfd:synth-test")
	return nil
}

func (c *child) anonExec() error {
	m, err := unix.Mmap(-1, 0, 4*page, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("mmap anonymous exec: %w", err)
	}
	m[0] = 0xc3 // touch it
	c.maps = append(c.maps, m)
	return nil
}

// command "unmap" of Proc.Unmap.
func (c *child) unmapLater() error {
	n := len(c.later)
	if n == 0 {
		return errors.New("unmap: nothing mapped with map")
	}
	m := c.later[n-1]
	c.later = c.later[:n-1]
	return unix.Munmap(m)
}

// command "move" or "shrink" of Proc.Move and Proc.Shrink: mremap(2)
// of the last mapping of "map", grown by a page where a page mapped
// right after it keeps it from growing in place, or cut to its first
// page.
func (c *child) remapLater(move bool) error {
	n := len(c.later)
	if n == 0 {
		return errors.New("remap: nothing mapped with map")
	}
	m := c.later[n-1]
	if !move {
		m, err := unix.Mremap(m, page, 0)
		if err == nil {
			c.later[n-1] = m
		}
		return err
	}
	end := unsafe.Add(unsafe.Pointer(unsafe.SliceData(m)), len(m)) // not Go memory
	guard, err := unix.MmapPtr(-1, 0, end, uintptr(page), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE)
	switch {
	case err == nil:
		defer unix.MunmapPtr(guard, uintptr(page))
	case !errors.Is(err, unix.EEXIST): // EEXIST: a mapping is there already
		return fmt.Errorf("map the guard page: %w", err)
	}
	moved, err := unix.Mremap(m, len(m)+page, unix.MREMAP_MAYMOVE)
	if err == nil {
		c.later[n-1] = moved
	}
	return err
}

func (c *child) dataFile() error {
	if err := c.mapFile(filepath.Join(c.spec.Dir, "data-ro.bin"), 2, unix.PROT_READ, false); err != nil {
		return err
	}
	return c.mapFile(filepath.Join(c.spec.Dir, "data-shared.bin"), 2, unix.PROT_READ|unix.PROT_WRITE, true)
}

// manyVMAs maps one file of ManyVMAs pages and gives every other page
// PROT_EXEC, so that each page is its own VMA with its own page offset.
// The file is sparse: nothing reads its pages, and a test that scales
// its count with the page size (64K pages) need not write a gigabyte.
func (c *child) manyVMAs() error {
	n := c.spec.ManyVMAs
	path := filepath.Join(c.spec.Dir, "many-vmas.bin")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(int64(n * page)); err != nil {
		return err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, n*page, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", path, err)
	}
	c.maps = append(c.maps, m)
	c.files = append(c.files, path)
	for i := 1; i < n; i += 2 {
		if err := unix.Mprotect(m[i*page:(i+1)*page], unix.PROT_READ|unix.PROT_EXEC); err != nil {
			return fmt.Errorf("mprotect page %d: %w", i, err)
		}
	}
	return nil
}

// threads starts one locked OS thread per name and names it.
func (c *child) threads() error {
	errs := make(chan error)
	for _, name := range c.spec.Threads {
		go func() {
			runtime.LockOSThread()
			errs <- unix.Prctl(unix.PR_SET_NAME, uintptr(unsafePtr(name)), 0, 0, 0)
			select {} // keep the thread, and its name, forever
		}()
	}
	for range c.spec.Threads {
		if err := <-errs; err != nil {
			return fmt.Errorf("name thread: %w", err)
		}
	}
	return nil
}

// mapExisting maps the files of Spec.Maps read-exec.
func (c *child) mapExisting() error {
	for _, ms := range c.spec.Maps {
		mode := os.O_RDONLY
		if ms.SharedWrite {
			mode = os.O_RDWR
		}
		f, err := os.OpenFile(ms.Path, mode, 0)
		if err != nil {
			return err
		}
		n := ms.Len
		if n == 0 {
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return err
			}
			n = fi.Size() - ms.Off
		}
		prot, flags := unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE
		if ms.SharedWrite {
			prot, flags = prot|unix.PROT_WRITE, unix.MAP_SHARED
		}
		m, err := unix.Mmap(int(f.Fd()), ms.Off, int(n), prot, flags)
		f.Close()
		if err != nil {
			return fmt.Errorf("mmap %s at %d: %w", ms.Path, ms.Off, err)
		}
		if ms.SharedWrite {
			// Write the first page once (its own first byte): later
			// writes to it take no page fault, and so do not change
			// the file's times.
			first := m[0]
			m[0] = first
		}
		c.maps = append(c.maps, m)
		c.existing = append(c.existing, m)
		c.files = append(c.files, ms.Path)
	}
	return nil
}

// mapLater maps the whole of an existing file read-execute, private: the
// command "map PATH" of Proc.Map.
func (c *child) mapLater(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", path, err)
	}
	c.maps = append(c.maps, m)
	c.later = append(c.later, m)
	return nil
}
