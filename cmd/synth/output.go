package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// checkStdout says why perf.data must not go to stdout: a terminal,
// which binary output would garble, or a regular file opened for
// appending (>>), where a second perf.data after the first is no
// perf.data, and the header of file mode could not be patched.
func checkStdout(f *os.File) error {
	fd := int(f.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		return errors.New("refusing to write perf.data to a terminal: use -o FILE, or redirect stdout")
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err == nil && fl&unix.O_APPEND != 0 {
		return errors.New("refusing to append perf.data to a file (>>): use -o FILE, or > to replace it")
	}
	return nil
}

// openOutput opens the -o file, or returns stdout; call it only once
// every check of the command has passed, as it replaces the file. With
// backup, a non-empty file is kept as FILE.old first, as perf record
// keeps perf.data.old.
func openOutput(path string, stdout *os.File, backup bool) (io.Writer, func() error, error) {
	if path == "" || path == "-" {
		return stdout, func() error { return nil }, nil
	}
	if backup {
		if err := keepOld(path); err != nil {
			return nil, nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open output: %w", err)
	}
	return f, func() error {
		if err := f.Close(); err != nil {
			return fmt.Errorf("close %s: %w", path, err)
		}
		return nil
	}, nil
}

// writeOptions are the write options of -o path: "-" asks for pipe
// mode, as perf record -o - does.
func writeOptions(path string) synth.WriteOptions {
	var wopts synth.WriteOptions
	if path == "-" {
		wopts.Mode = perfdata.ModePipe
	}
	return wopts
}

// keepOld renames a non-empty file at path to path.old, as perf record
// keeps perf.data.old.
func keepOld(path string) error {
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
		if err := os.Rename(path, path+".old"); err != nil {
			return fmt.Errorf("keep the previous output: %w", err)
		}
	}
	return nil
}
