package bpfprog

import (
	"slices"
	"sync"
)

// A dump reads each loaded program to write its symbols, and the
// perf.data header wants the same program's information again when its
// BPF_EVENT record passes by: the programs and BTF objects read are kept,
// so that none is read from the kernel twice. What is kept cannot go
// stale: a program's information and a BTF object do not change once
// loaded, and the kernel allocates their ids cyclically, so an id is not
// reused for another object before some 2^31 have been loaded. IDs
// forgets what is no longer loaded.
var (
	progs = cache[*Prog]{}
	btfs  = cache[[]byte]{}
)

// cache keeps objects by id.
type cache[T any] struct {
	mu sync.Mutex
	m  map[uint32]T
}

// get returns object id, reading it with read on first use. Errors are
// not kept: the next call tries again.
func (c *cache[T]) get(id uint32, read func(uint32) (T, error)) (T, error) {
	c.mu.Lock()
	v, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := read(id)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[uint32]T)
	}
	c.m[id] = v
	return v, nil
}

// keep forgets every object whose id keep does not report as loaded.
func (c *cache[T]) keep(loaded func(uint32) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.m {
		if !loaded(id) {
			delete(c.m, id)
		}
	}
}

// forgetUnloaded drops the programs not in ids (sorted), and the BTF
// objects no kept program refers to.
func forgetUnloaded(ids []uint32) {
	progs.keep(func(id uint32) bool {
		_, ok := slices.BinarySearch(ids, id)
		return ok
	})
	used := map[uint32]bool{}
	progs.mu.Lock()
	for _, p := range progs.m {
		used[p.BTFID()] = true
	}
	progs.mu.Unlock()
	btfs.keep(func(id uint32) bool { return used[id] })
}
