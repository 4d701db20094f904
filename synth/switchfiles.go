package synth

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// TimestampedFiles returns the Output of perf record --switch-output:
// each file is written to path and, once complete, renamed
// path.<timestamp>, the time it was closed as perf writes it
// (YYYYmmddHHMMSS and hundredths). With max above 0 only the max newest
// files are kept, as --switch-max-files keeps them. done, when set, is
// told each file's final name. A file opened while the previous one is
// still being completed is written as path.next until then.
func TimestampedFiles(path string, max int, done func(name string)) Output {
	t := &tsFiles{path: path, max: max, done: done}
	return t.next
}

type tsFiles struct {
	path string
	max  int
	done func(string)
	open []*string // the names of the files open, oldest first
	kept []string
}

func (t *tsFiles) next() (io.Writer, func() error, error) {
	name := t.path
	if len(t.open) > 0 {
		name = t.path + ".next"
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open output: %w", err)
	}
	cur := &name
	t.open = append(t.open, cur)
	return f, func() error {
		if err := f.Close(); err != nil {
			return fmt.Errorf("close %s: %w", *cur, err)
		}
		return t.closed(cur)
	}, nil
}

// closed renames a complete file, and the next one, if open, to path.
func (t *tsFiles) closed(cur *string) error {
	t.open = t.open[1:] // files complete in the order they were opened
	final := timestamped(t.path, time.Now())
	if err := os.Rename(*cur, final); err != nil {
		return fmt.Errorf("switch output: %w", err)
	}
	if len(t.open) > 0 && *t.open[0] != t.path {
		if err := os.Rename(*t.open[0], t.path); err != nil {
			return fmt.Errorf("switch output: %w", err)
		}
		*t.open[0] = t.path
	}
	if t.kept = append(t.kept, final); t.max > 0 && len(t.kept) > t.max {
		// One moved away meanwhile is not an error, as for perf.
		if err := os.Remove(t.kept[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("switch output: remove the oldest file: %w", err)
		}
		t.kept = t.kept[1:]
	}
	if t.done != nil {
		t.done(final)
	}
	return nil
}

// timestamped names a complete file; a name taken (two switches in the
// same hundredth) gets a counter.
func timestamped(path string, t time.Time) string {
	name := fmt.Sprintf("%s.%s%02d", path, t.Format("20060102150405"), t.Nanosecond()/1e7)
	for i, n := 1, name; ; i++ {
		if _, err := os.Lstat(n); errors.Is(err, fs.ErrNotExist) {
			return n
		}
		n = fmt.Sprintf("%s.%d", name, i)
	}
}
