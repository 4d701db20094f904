package synth_test

import (
	"context"
	"encoding/hex"
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
	m, err := synth.OpenMethod(synth.MethodBPF, synth.MethodOptions{Options: synth.Options{Pids: []int{os.Getpid()}}})
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

// Follow this process's new mappings: a Session's dump fills a Table,
// and its live stream keeps it current. Reading ends when the mapping
// is seen, or after five seconds.
func ExampleTable_Apply() {
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Pids: []int{os.Getpid()}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	if err := s.Dump(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	table := synth.NewTable()
	var rec synth.Record
	var addr, size uint64 // of the new mapping, once made
	for {
		if err := s.ReadContext(ctx, &rec); err != nil {
			fmt.Println(err)
			return
		}
		// Every record: the dump's replace what the table held of each
		// process, its end drops the processes gone, live ones follow.
		if err := table.Apply(&rec); err != nil {
			fmt.Println(err)
			return
		}
		if rec.Kind == synth.KindDumpEnd {
			// The table holds the dump; now map something new.
			exe, _ := os.Executable()
			f, err := os.Open(exe)
			if err != nil {
				fmt.Println(err)
				return
			}
			mem, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
			f.Close()
			if err != nil {
				fmt.Println(err)
				return
			}
			defer unix.Munmap(mem)
			addr, size = uint64(uintptr(unsafe.Pointer(&mem[0]))), uint64(len(mem))
			continue
		}
		if addr == 0 {
			continue
		}
		me, _ := table.Process(uint32(os.Getpid()))
		if m, ok := me.Lookup(addr); ok && m.Start == addr {
			exe, _ := os.Executable()
			fmt.Println("new mapping of this program:", m.Path == exe, m.End-m.Start == size)
			break
		}
	}
	// Output: new mapping of this program: true true
}
