package synth

import (
	"fmt"
	"io"
	"os"
	"time"
)

// TimestampedFiles returns the Output of perf record --switch-output:
// each file is written to path and, once complete, renamed
// path.<timestamp>, the time it was closed as perf writes it
// (YYYYmmddHHMMSS and hundredths). With max above 0 only the max newest
// files are kept, as --switch-max-files keeps them. done, when set, is
// told each file's final name.
func TimestampedFiles(path string, max int, done func(name string)) Output {
	var kept []string
	return func() (io.Writer, func() error, error) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("open output: %w", err)
		}
		return f, func() error {
			if err := f.Close(); err != nil {
				return fmt.Errorf("close %s: %w", path, err)
			}
			name := timestamped(path, time.Now())
			if err := os.Rename(path, name); err != nil {
				return fmt.Errorf("switch output: %w", err)
			}
			if kept = append(kept, name); max > 0 && len(kept) > max {
				if err := os.Remove(kept[0]); err != nil {
					return fmt.Errorf("switch output: remove the oldest file: %w", err)
				}
				kept = kept[1:]
			}
			if done != nil {
				done(name)
			}
			return nil
		}, nil
	}
}

// timestamped names a complete file; a name taken (two switches in the
// same hundredth) gets a counter.
func timestamped(path string, t time.Time) string {
	name := fmt.Sprintf("%s.%s%02d", path, t.Format("20060102150405"), t.Nanosecond()/1e7)
	for i, n := 1, name; ; i++ {
		if _, err := os.Lstat(n); os.IsNotExist(err) {
			return n
		}
		n = fmt.Sprintf("%s.%d", name, i)
	}
}
