package mapread

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote"
)

// Stat is what a read needs of fstat(2): the file and its times.
type Stat struct {
	Dev, Ino     uint64
	Ctime, Mtime unix.Timespec
}

// Result is the outcome of reading one mapped file.
type Result struct {
	// Opened: the entry led to a file, and Before and FsType describe it.
	Opened bool
	// Read: the file was read through, and ID is its build ID, or nil
	// for none. Otherwise an I/O error ended the read.
	Read          bool
	ID            []byte
	FsType        int64 // statfs(2) f_type
	Before, After Stat  // fstat before and after the read
}

// Path is the /proc/PID/map_files entry of the mapping [start, end) of
// process pid.
func Path(pid int, start, end uint64) string {
	return fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, start, end)
}

// Read reads the build ID of the file path (a map_files entry) in this
// process. The caller checks that Before and After name the file it
// wants, with the same contents.
func Read(path string) Result {
	f, err := os.Open(path)
	if err != nil {
		return Result{}
	}
	defer f.Close()
	return read(f, false)
}

// ReadRegular is Read of f, a file opened by its name, which could be
// anything by now: only a regular file is read.
func ReadRegular(f *os.File) Result { return read(f, true) }

func read(f *os.File, regular bool) Result {
	var res Result
	fd := int(f.Fd())
	var st unix.Stat_t
	var fs unix.Statfs_t
	if unix.Fstat(fd, &st) != nil || unix.Fstatfs(fd, &fs) != nil {
		return res
	}
	if regular && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return res
	}
	res.Opened, res.Before, res.FsType = true, StatOf(&st), int64(fs.Type)
	id, err := elfnote.BuildID(f, st.Size)
	var fe *elfnote.FormatError
	switch {
	case err == nil, errors.Is(err, elfnote.ErrNotELF), errors.As(err, &fe):
	default:
		return res // an I/O error: unknown, not "none"
	}
	if unix.Fstat(fd, &st) != nil {
		return res
	}
	res.Read, res.ID, res.After = true, id, StatOf(&st)
	return res
}

// StatOf is the Stat of st.
func StatOf(st *unix.Stat_t) Stat {
	return Stat{Dev: st.Dev, Ino: st.Ino, Ctime: st.Ctim, Mtime: st.Mtim}
}
