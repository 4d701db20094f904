package synth_test

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/synth-dev/synth/synth"
)

// Files are written as path, the next one as path.next while the one
// before is being completed, and renamed path.<timestamp> once complete;
// with max 1 only the newest is kept, and one removed meanwhile is not an
// error.
func TestTimestampedFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	var names []string
	next := synth.TimestampedFiles(path, 1, func(name string) { names = append(names, name) })
	open := func(content string) func() error {
		w, closeF, err := next()
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, content)
		return closeF
	}
	close1 := open("one")
	close2 := open("two") // before the first is complete
	if b, _ := os.ReadFile(path + ".next"); string(b) != "two" {
		t.Fatalf("the second file is not %s.next: %q", path, b)
	}
	if err := close1(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("once the first is complete the second is not %s: %q", path, b)
	}
	time.Sleep(20 * time.Millisecond) // another hundredth
	os.Remove(names[0])               // moved away by someone else
	if err := close2(); err != nil {
		t.Fatal(err)
	}
	nameRE := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `\.\d{16}$`)
	left, _ := filepath.Glob(path + "*")
	if len(names) != 2 || !nameRE.MatchString(names[0]) || !nameRE.MatchString(names[1]) ||
		len(left) != 1 || left[0] != names[1] {
		t.Fatalf("names %v, left %v", names, left)
	}
	if b, _ := os.ReadFile(names[1]); string(b) != "two" {
		t.Errorf("%s holds %q", names[1], b)
	}
}
