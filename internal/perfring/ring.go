package perfring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrCorrupt is returned when a record header in a ring makes no sense:
// a size below the header's own or beyond the published data.
var ErrCorrupt = errors.New("perf ring: corrupt record header")

// Ring reads the records of one perf ring buffer in the order the kernel
// wrote them. It is not safe for concurrent use.
type Ring struct {
	meta *unix.PerfEventMmapPage
	data []byte
	tail uint64
	// wrapped holds a record that wraps around the end of the data
	// area, reused from one record to the next.
	wrapped []byte
}

// NewRing reads the ring in mem: a metadata page of pageSize bytes and
// the data area after it, as mmap(2) of a perf event returns them. The
// data area must be a power of two bytes long.
func NewRing(mem []byte, pageSize int) (*Ring, error) {
	if len(mem) < pageSize || pageSize < int(unsafe.Sizeof(unix.PerfEventMmapPage{})) {
		return nil, fmt.Errorf("perf ring of %d bytes: no room for the metadata page", len(mem))
	}
	meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	off, size := meta.Data_offset, meta.Data_size
	if off == 0 || size == 0 { // kernels before 4.1 leave them 0
		off, size = uint64(pageSize), uint64(len(mem)-pageSize)
	}
	if size == 0 || size&(size-1) != 0 || off+size > uint64(len(mem)) {
		return nil, fmt.Errorf("perf ring: data area of %d bytes at %d in %d: not a power of two inside the mapping", size, off, len(mem))
	}
	return &Ring{
		meta: meta,
		data: mem[off : off+size],
		tail: atomic.LoadUint64(&meta.Data_tail),
	}, nil
}

// Size returns the size of the data area in bytes.
func (r *Ring) Size() int { return len(r.data) }

// Pending reports whether the ring holds unread records.
func (r *Ring) Pending() bool {
	return atomic.LoadUint64(&r.meta.Data_head) != r.tail
}

// ReadAll hands every record now in the ring to fn, header included, in
// order, and then gives their space back to the kernel. rec is only
// valid during the call. An error from fn stops the reading; the records
// before it, and the one it failed on, count as read.
func (r *Ring) ReadAll(fn func(rec []byte) error) error {
	// The acquire load pairs with the kernel's release store of
	// data_head: the records below it are complete.
	head := atomic.LoadUint64(&r.meta.Data_head)
	size := uint64(len(r.data))
	mask := size - 1
	tail := r.tail
	var err error
	for tail < head && err == nil {
		off := tail & mask
		var hdr [8]byte // struct perf_event_header, which may wrap too
		for i := range hdr {
			hdr[i] = r.data[(off+uint64(i))&mask]
		}
		n := uint64(*(*uint16)(unsafe.Pointer(&hdr[6])))
		if n < uint64(len(hdr)) || n > head-tail {
			err = fmt.Errorf("%w: size %d with %d bytes left", ErrCorrupt, n, head-tail)
			tail = head // skip what cannot be parsed rather than spin
			break
		}
		var rec []byte
		if off+n <= size {
			rec = r.data[off : off+n]
		} else {
			r.wrapped = append(append(r.wrapped[:0], r.data[off:]...), r.data[:off+n-size]...)
			rec = r.wrapped
		}
		err = fn(rec)
		tail += n
	}
	r.tail = tail
	// The release store hands the space back only after it was read.
	atomic.StoreUint64(&r.meta.Data_tail, tail)
	return err
}
