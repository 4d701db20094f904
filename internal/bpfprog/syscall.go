package bpfprog

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/bpfsys"
)

// ErrPermission means the caller may not list the kernel's BPF objects
// (it lacks CAP_SYS_ADMIN), so there is nothing to synthesize, as perf
// record treats it.
var ErrPermission = errors.New("listing BPF programs needs CAP_SYS_ADMIN")

// Listing goes through cilium/ebpf (IDs, HasTracingLinks). Reading a
// program or a BTF object does not: perf keeps the kernel's struct
// bpf_prog_info and the raw BTF as the kernel fills them, arrays
// included, and cilium/ebpf decodes both into its own types and keeps
// no bytes; its NewProgramFromID also reads the info once more to name
// the program. So the two commands are issued here, with the bpf_attr
// layouts below (include/uapi/linux/bpf.h).

// idAttr is the bpf_attr of the GET_FD_BY_ID commands: the object's
// id, next_id, open_flags.
type idAttr struct {
	id, next, flags uint32
}

// infoAttr is the bpf_attr of BPF_OBJ_GET_INFO_BY_FD: bpf_fd, info_len,
// info.
type infoAttr struct {
	fd, len uint32
	info    bpfsys.Pointer
}

// fdByID opens the object id with cmd.
func fdByID(cmd int, id uint32) (int, error) {
	a := idAttr{id: id}
	return bpfsys.BPF(cmd, unsafe.Pointer(&a), unsafe.Sizeof(a))
}

// objInfo fills info, the object's info struct, whose array pointers
// point into keep; it returns the length the kernel filled. The runtime
// cannot see those pointers, written as integers into info: keep must
// be on the heap (package bpfsys), as a slice made with a size known
// only at run time is.
func objInfo(fd int, info []byte, keep []byte) (int, error) {
	a := infoAttr{fd: uint32(fd), len: uint32(len(info)), info: bpfsys.SlicePointer(info)}
	_, err := bpfsys.BPF(unix.BPF_OBJ_GET_INFO_BY_FD, unsafe.Pointer(&a), unsafe.Sizeof(a))
	runtime.KeepAlive(keep)
	if err != nil {
		return 0, fmt.Errorf("get info: %w", err)
	}
	return int(a.len), nil
}

// IDs lists the ids of the loaded BPF programs, in increasing order, as
// perf walks them.
func IDs() ([]uint32, error) {
	var ids []uint32
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		switch {
		case errors.Is(err, os.ErrNotExist):
			forgetUnloaded(ids)
			return ids, nil
		case errors.Is(err, unix.EPERM):
			return ids, fmt.Errorf("list BPF programs: %w", ErrPermission)
		case err != nil:
			return ids, fmt.Errorf("list BPF programs: %w", err)
		}
		ids = append(ids, uint32(next))
		id = next
	}
}

// BTF returns the raw BTF object id, as perf keeps it in HEADER_BPF_BTF,
// read from the kernel the first time (see cache.go).
func BTF(id uint32) ([]byte, error) {
	return btfs.get(id, readBTF)
}

// readBTF reads BTF object id from the kernel.
func readBTF(id uint32) ([]byte, error) {
	fd, err := fdByID(unix.BPF_BTF_GET_FD_BY_ID, id)
	if err != nil {
		return nil, fmt.Errorf("open BTF %d: %w", id, err)
	}
	defer unix.Close(fd)
	// struct bpf_btf_info: u64 btf; u32 btf_size, id; u64 name;
	// u32 name_len, kernel_btf.
	var info [32]byte
	if _, err := objInfo(fd, info[:], nil); err != nil {
		return nil, fmt.Errorf("BTF %d: %w", id, err)
	}
	size := ne.Uint32(info[8:])
	if size > maxArray {
		return nil, fmt.Errorf("BTF %d: %d bytes", id, size)
	}
	raw := make([]byte, size)
	info = [32]byte{}
	ne.PutUint64(info[0:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(raw)))))
	ne.PutUint32(info[8:], size)
	if _, err := objInfo(fd, info[:], raw); err != nil {
		return nil, fmt.Errorf("BTF %d: %w", id, err)
	}
	if got := ne.Uint32(info[8:]); got != size {
		return nil, fmt.Errorf("BTF %d changed size: %d bytes, then %d", id, size, got)
	}
	return raw, nil
}

// HasTracingLinks reports whether a tracing link is attached (an
// fentry, fexit, fmod_ret, LSM or freplace program's): only then can the
// kernel hold BPF trampolines (bpf_trampoline_* in kallsyms).
func HasTracingLinks() (bool, error) {
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		if info, err := it.Link.Info(); err == nil && info.Type == link.TracingType {
			return true, nil
		}
	}
	if errors.Is(it.Err(), unix.EPERM) {
		return false, ErrPermission
	}
	return false, it.Err()
}
