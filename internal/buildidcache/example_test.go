package buildidcache_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/synth-dev/synth/internal/buildidcache"
	"github.com/synth-dev/synth/internal/elfnote/elftest"
)

// Put a file in a build-ID cache, and list the cache as perf lays it
// out.
func Example() {
	tmp, err := os.MkdirTemp("", "buildidcache")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	id := bytes.Repeat([]byte{0xab}, 20)
	lib := filepath.Join(tmp, "libspin.so")
	if err := os.WriteFile(lib, elftest.Good(id), 0o755); err != nil {
		panic(err)
	}

	c := &buildidcache.Cache{Dir: filepath.Join(tmp, "debug")}
	st := c.Fill([]buildidcache.Entry{{Name: lib, BuildID: id}})
	fmt.Printf("added %d, mismatched %d\n", st.Added, st.Mismatch)

	filepath.WalkDir(c.Dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(c.Dir, p)
		rel = strings.ReplaceAll(rel, tmp[1:], "TMP")
		if d.Type()&fs.ModeSymlink != 0 {
			to, _ := os.Readlink(p)
			fmt.Println(rel, "->", strings.ReplaceAll(to, tmp[1:], "TMP"))
		} else if !d.IsDir() {
			fmt.Println(rel)
		}
		return nil
	})
	// Output:
	// added 1, mismatched 0
	// .build-id/ab/ababababababababababababababababababab -> ../../TMP/libspin.so/abababababababababababababababababababab
	// TMP/libspin.so/abababababababababababababababababababab/elf
}
