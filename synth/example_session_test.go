package synth_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/synth"
)

// Stream this process's mappings: the dump's synthesized state, then a
// mapping made afterwards, reported live. It needs CAP_BPF and
// CAP_PERFMON (the tests run as root).
func ExampleSession() {
	s, err := synth.NewSession(synth.SessionOptions{
		Options: synth.Options{Pids: []int{os.Getpid()}, Data: true, NoKernel: true},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	if err := s.Dump(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	f, err := os.CreateTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(f.Name())
	counts := map[synth.RecordKind]int{}
	var rec synth.Record
	for {
		err := s.ReadInto(&rec)
		if errors.Is(err, synth.ErrFlushed) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		counts[rec.Kind]++
		if rec.Kind == synth.KindDumpEnd {
			// Map something new, then read what the rings hold.
			f.Truncate(4096)
			mem, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				fmt.Println(err)
				return
			}
			defer unix.Munmap(mem)
			s.Flush()
		}
	}
	fmt.Println("synthesized:", counts[synth.KindSynthesized] > 0)
	fmt.Println("dumps:", counts[synth.KindDumpEnd])
	fmt.Println("live:", counts[synth.KindLive] > 0)
	fmt.Println("lost:", s.Stats().Lost)
	// Output:
	// synthesized: true
	// dumps: 1
	// live: true
	// lost: 0
}
