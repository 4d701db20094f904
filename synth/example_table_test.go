package synth_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/synth"
)

// Take a snapshot of this process and print the build IDs of its files,
// as a profiler's symbolizer would look them up.
func ExampleSnapshot() {
	m, err := synth.OpenMethod(synth.MethodBPF, synth.MethodOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	table, _, err := synth.Snapshot(context.Background(), m)
	if err != nil {
		fmt.Println(err)
		return
	}
	me, _ := table.Process(uint32(os.Getpid()))
	ids := map[string]string{}
	for _, m := range me.Mappings {
		if m.BuildID != nil {
			ids[m.Path] = hex.EncodeToString(m.BuildID) // e.g. /usr/lib/x86_64-linux-gnu/libc.so.6 93ac61ec…
		}
	}
	exe, _ := os.Executable()
	fmt.Println("build IDs:", len(ids) > 0, "of this program:", len(ids[exe]) == 40)
	// Output: build IDs: true of this program: true
}

// Follow this process's new mappings and unmaps: a Session's dump fills
// a Table, and its live stream keeps it current. Reading gives up after
// five seconds.
func ExampleTable_Apply() {
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}}, Unmaps: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	table := synth.NewTable()
	// apply applies every record until done says stop, or until a flush
	// ends: the dump's replace what the table held of each process, its
	// end drops the processes gone, live ones follow, unmaps included.
	apply := func(done func(*synth.Record) bool) error {
		var rec synth.Record
		for {
			err := s.ReadContext(ctx, &rec)
			if errors.Is(err, synth.ErrFlushed) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := table.Apply(&rec); err != nil {
				return err
			}
			if done(&rec) {
				return nil
			}
		}
	}
	if err := s.Dump(ctx); err != nil {
		fmt.Println(err)
		return
	}
	dumped := func(rec *synth.Record) bool { return rec.Kind == synth.KindDumpEnd }
	if err := apply(dumped); err != nil {
		fmt.Println(err)
		return
	}
	// The table holds the dump; now map something new.
	mem, err := mapSelf()
	if err != nil {
		fmt.Println(err)
		return
	}
	addr := uint64(uintptr(unsafe.Pointer(&mem[0])))
	me, _ := table.Process(uint32(os.Getpid()))
	err = apply(func(*synth.Record) bool {
		m, ok := me.Lookup(addr)
		return ok && m.Start == addr
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ := me.Lookup(addr)
	exe, _ := os.Executable()
	fmt.Println("new mapping of this program:", m.Path == exe, m.End-m.Start == uint64(len(mem)))

	// Unmapped: the stream says so at once where the kernel lets synth
	// see unmaps, else the next dump does.
	unix.Munmap(mem)
	if s.UnmapsErr() != nil {
		err = s.Dump(ctx)
	} else {
		err = s.Flush()
	}
	if err == nil {
		err = apply(dumped) // or the flush's end

	}
	if err != nil {
		fmt.Println(err)
		return
	}
	_, mapped := me.Lookup(addr)
	fmt.Println("still in the table once unmapped:", mapped)
	// Output:
	// new mapping of this program: true true
	// still in the table once unmapped: false
}

// mapSelf maps the first page of this program.
func mapSelf() ([]byte, error) {
	exe, _ := os.Executable()
	f, err := os.Open(exe)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
}
