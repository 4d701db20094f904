// Package perfring is synth's transport: perf events opened with
// perf_event_open(2) and the ring buffers mapped on them.
//
// A ring is the mapping of a perf event: one metadata page (struct
// perf_event_mmap_page, include/uapi/linux/perf_event.h) followed by a
// power-of-two data area that the kernel fills with records:
//
//	         data_tail (ours)            data_head (the kernel's)
//	              v                             v
//	[ meta page ][ ....read.... | unread records | free ........ ]
//
// The kernel writes records at data_head and publishes it with a store
// release; the reader reads up to data_head, then stores data_tail to
// hand the space back. A record may wrap around the end of the data
// area; Ring.ReadAll hands it over in one piece.
//
// Ring is built on nothing but that memory, so the ring logic is
// tested without a kernel (see ring_test.go).
package perfring
