package kcache_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/synth-dev/synth/internal/kcache"
)

// A loader takes a program linked from the cache, or links it against
// the kernel's BTF and stores it.
func Example() {
	tmp, err := os.MkdirTemp("", "kcache")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	c, err := kcache.Open(filepath.Join(tmp, "synth")) // kcache.DefaultDir, as root
	if err != nil {
		log.Fatal(err)
	}
	// kcache.CurrentKey(the object's hash) on a real kernel.
	key := kcache.Key{Kernel: []byte{0xca, 0xfe}, BTFSize: 5519912, Object: [32]byte{1}}
	for range 2 {
		p, err := c.Load(key, "dump_task")
		if errors.Is(err, kcache.ErrMiss) {
			fmt.Println("miss: link against the kernel's BTF")
			p = kcache.Program{Code: []byte{0xb7, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0}, AttachID: 64270}
			if err := c.Store(key, "dump_task", p); err != nil {
				fmt.Println("not stored:", err) // the next run misses too
			}
			continue
		}
		fmt.Printf("hit: dump_task, %d instructions, attached to BTF ID %d\n", len(p.Code)/8, p.AttachID)
	}
	// Output:
	// miss: link against the kernel's BTF
	// hit: dump_task, 2 instructions, attached to BTF ID 64270
}
