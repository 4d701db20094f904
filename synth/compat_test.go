package synth_test

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// writeI386Pause writes a static i386 executable that loops on pause(2):
// an ELF header, one PT_LOAD program header and 9 bytes of code.
func writeI386Pause(t *testing.T, path string) {
	t.Helper()
	const base, ehsize, phsize = 0x08048000, 52, 32
	code := []byte{
		0xb8, 29, 0, 0, 0, // mov eax, __NR_pause
		0xcd, 0x80, // int 0x80
		0xeb, 0xf7, // jmp to the mov
	}
	size := uint32(ehsize + phsize + len(code))
	le := binary.LittleEndian
	b := []byte{0x7f, 'E', 'L', 'F', 1 /* ELFCLASS32 */, 1 /* LSB */, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	b = le.AppendUint16(b, 2) // ET_EXEC
	b = le.AppendUint16(b, 3) // EM_386
	b = le.AppendUint32(b, 1)
	b = le.AppendUint32(b, base+ehsize+phsize) // e_entry
	b = le.AppendUint32(b, ehsize)             // e_phoff
	b = le.AppendUint32(b, 0)                  // e_shoff
	b = le.AppendUint32(b, 0)                  // e_flags
	for _, v := range []uint16{ehsize, phsize, 1, 0, 0, 0} {
		b = le.AppendUint16(b, v)
	}
	for _, v := range []uint32{1 /* PT_LOAD */, 0, base, base, size, size, 5 /* R|X */, 0x1000} {
		b = le.AppendUint32(b, v)
	}
	b = append(b, code...)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A 32-bit process has no [vsyscall] in /proc/PID/maps, and no method
// adds one to it; a 64-bit process has it.
func TestNoVsyscallFor32Bit(t *testing.T) {
	testenv.Arch(t, "amd64", "i386 executables and the [vsyscall] page")
	testenv.Root(t)
	bin := filepath.Join(t.TempDir(), "pause32")
	writeI386Pause(t, bin)
	p32 := exec.Command(bin)
	err := p32.Start()
	var errno syscall.Errno
	testenv.Option(t, !errors.As(err, &errno) || errno != syscall.ENOEXEC, "IA32_EMULATION (it runs no i386 executables)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p32.Process.Kill(); p32.Wait() })
	p64 := testproc.StartSleep(t, "sleep", exec.Command("sleep", "60"))
	// The 32-bit process's exec is done once its exe is pause32.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(p32.Process.Pid) + "/exe"); strings.HasSuffix(exe, "/pause32") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d does not run pause32", p32.Process.Pid)
		}
	}
	maps, _ := os.ReadFile("/proc/" + strconv.Itoa(p32.Process.Pid) + "/maps")
	if strings.Contains(string(maps), "[vsyscall]") || !strings.Contains(string(maps), "pause32") {
		t.Fatalf("the 32-bit process's maps:\n%s", maps)
	}
	// A kernel booted with vsyscall=none (or built without
	// LEGACY_VSYSCALL) shows it for no process.
	maps64, _ := os.ReadFile("/proc/" + strconv.Itoa(p64) + "/maps")
	vsyscall := strings.Contains(string(maps64), "[vsyscall]")
	type method struct {
		method synth.MethodName
		walk   synth.Walk
	}
	methods := []method{{synth.MethodBPF, ""}, {synth.MethodBPF, synth.WalkIter}}
	for _, m := range procMethods(t) {
		methods = append(methods, method{m, ""})
	}
	for _, c := range methods {
		out := filepath.Join(t.TempDir(), "perf.data")
		writeDump(t, out, c.method, synth.MethodOptions{Options: synth.Options{
			Target: synth.Target{Pids: []int{p32.Process.Pid, p64}}, NoKernel: true, Walk: c.walk}})
		gate := map[uint32]bool{}
		named := false
		for _, rec := range perftest.ReadRecords(t, out) {
			if rec.Type != perfdata.RecordMmap2 {
				continue
			}
			m, _, err := perfdata.ParseMmap2(rec.Data, rec.SampleType)
			if err != nil {
				t.Fatal(err)
			}
			gate[m.Pid] = gate[m.Pid] || m.Filename == "[vsyscall]"
			named = named || strings.HasSuffix(m.Filename, "/pause32")
		}
		if !named || gate[uint32(p32.Process.Pid)] || gate[uint32(p64)] != vsyscall {
			t.Errorf("%s %s: pause32 mapped %v; [vsyscall] of the 32-bit process %v, of the 64-bit one %v (want false, %v as /proc)",
				c.method, c.walk, named, gate[uint32(p32.Process.Pid)], gate[uint32(p64)], vsyscall)
		}
	}
}
