package profconv

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// readKallsyms reads the kernel's function symbols, modules' included;
// nil when the file cannot be read or hides the addresses (all zero,
// kptr_restrict).
func readKallsyms(path string) *symtab {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	t := &symtab{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "ffffffff81000000 T _text\t[module]"
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 3 || len(fields[1]) != 1 {
			continue
		}
		switch fields[1][0] {
		case 'T', 't', 'W', 'w':
		default:
			continue
		}
		addr, err := strconv.ParseUint(string(fields[0]), 16, 64)
		if err != nil || addr == 0 {
			continue
		}
		t.syms = append(t.syms, sym{addr: addr, name: string(fields[2])})
	}
	if len(t.syms) == 0 {
		return nil
	}
	t.sort()
	return t
}
