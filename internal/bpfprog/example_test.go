package bpfprog_test

import (
	"fmt"

	"github.com/synth-dev/synth/internal/bpfprog"
)

// List the JITed functions of every loaded BPF program, named as perf
// names them in PERF_RECORD_KSYMBOL.
func Example() {
	ids, err := bpfprog.IDs()
	if err != nil {
		fmt.Println(err) // bpfprog.ErrPermission without CAP_SYS_ADMIN
		return
	}
	for _, id := range ids {
		p, err := bpfprog.Load(id)
		if err != nil {
			continue // unloaded since it was listed
		}
		var raw []byte
		if p.BTFID() != 0 {
			raw, _ = bpfprog.BTF(p.BTFID())
		}
		for _, s := range p.Symbols(raw) {
			fmt.Printf("%d %#x %d %s\n", p.ID(), s.Addr, s.Len, s.Name)
		}
	}
}
