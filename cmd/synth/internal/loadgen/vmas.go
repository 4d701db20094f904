package loadgen

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/hostarch"
)

// page is the kernel's page size: 4K on x86-64, 4K, 16K or 64K on arm64.
var page = os.Getpagesize()

// makeVMAs makes about n VMAs: half in executable file mappings of real
// libraries (pages alternately r-x and r--), a quarter in private data
// mappings of them (rw- and r--), a quarter anonymous (rw- and r--). The
// mappings are kept for the life of the process.
func makeVMAs(n int) (int, error) {
	libs := libraries()
	if len(libs) == 0 {
		return 0, errors.New("no shared libraries in " + hostarch.LibDir())
	}
	made := 0
	for i := 0; made < n/2 && i < 10*len(libs); i++ {
		k, err := mapFile(libs[i%len(libs)], n/2-made, unix.PROT_READ|unix.PROT_EXEC, unix.PROT_READ)
		if err != nil {
			return made, err
		}
		made += k
	}
	for i := 0; made < 3*n/4 && i < 10*len(libs); i++ {
		k, err := mapFile(libs[i%len(libs)], 3*n/4-made, unix.PROT_READ|unix.PROT_WRITE, unix.PROT_READ)
		if err != nil {
			return made, err
		}
		made += k
	}
	k, err := mapAnon(n - made)
	return made + k, err
}

// mapFile maps up to want pages of a file and alternates protections.
func mapFile(path string, want, even, odd int) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	pages := min(int(fi.Size()/int64(page)), want)
	if pages == 0 {
		return 0, nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, pages*page, even, unix.MAP_PRIVATE)
	if err != nil {
		return 0, err
	}
	return pages, alternate(m, pages, odd)
}

func mapAnon(pages int) (int, error) {
	if pages <= 0 {
		return 0, nil
	}
	m, err := unix.Mmap(-1, 0, pages*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, err
	}
	return pages, alternate(m, pages, unix.PROT_READ)
}

// alternate gives every odd page of m the protection odd, splitting the
// mapping into one VMA per page.
func alternate(m []byte, pages, odd int) error {
	for i := 1; i < pages; i += 2 {
		if err := unix.Mprotect(m[i*page:(i+1)*page], odd); err != nil {
			return err
		}
	}
	return nil
}
