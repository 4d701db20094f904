package synth

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/bpfiter"
	"github.com/synth-dev/synth/internal/elfnote"
	"golang.org/x/sys/unix"
)

// Build-ID sources, as struct synth_build_id.source says.
const (
	bidBPF  = 1
	bidUser = 2
)

// cfgBuildID mirrors SYNTH_CFG_BUILDID.
const cfgBuildID = 2

// buildIDPass fills the build-ID cache: the BPF prepass reads every ELF
// file mapped at offset 0 from process memory; what it left pending is
// read here through /proc/PID/map_files.
func (b *BPF) buildIDPass(ctx context.Context, d *dump) error {
	var before, after uint64
	if err := b.objs.BidReads.Get(&before); err != nil {
		return fmt.Errorf("read build-id counters: %w", err)
	}
	pids := b.opts.Pids
	if len(pids) == 0 {
		pids = []int{0}
	}
	for _, pid := range pids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := bpfiter.Drain(b.objs.BuildIdsPrepass, pid); err != nil {
			return err
		}
	}
	if err := b.objs.BidReads.Get(&after); err != nil {
		return fmt.Errorf("read build-id counters: %w", err)
	}
	d.stats.ELFReads = int(after - before)
	if _, err := b.resolvePending(d, nil); err != nil {
		return err
	}
	return b.countCache(d)
}

// resolvePending reads the files the prepass could not, or that the
// maple walk found new, and caches the result (no build ID included) so
// they are read once. It returns the build IDs it found, by file.
//
// others, when set, names other mappings of a file: the mapping noted
// for it may be gone by now (a short-lived child that mapped it first),
// and the file is then read through another process's.
func (b *BPF) resolvePending(d *dump, others func(fileIdent) []mappingAt) (map[fileIdent][]byte, error) {
	var (
		key     synthbpf.SynthSynthFileKey
		pend    synthbpf.SynthSynthPending
		done    []synthbpf.SynthSynthFileKey
		id      synthbpf.SynthSynthBuildId
		entries = b.objs.Pending.Iterate()
		found   map[fileIdent][]byte
	)
	for entries.Next(&key, &pend) {
		done = append(done, key)
		if b.objs.BuildIds.Lookup(&key, &id) == nil {
			continue // read by BPF from another mapping
		}
		bid, ok := readMappedBuildID(int(pend.Pid), pend.Start, pend.End, &key)
		if !ok && others != nil {
			for _, m := range others(identOfKey(&key)) {
				if bid, ok = readMappedBuildID(m.pid, m.start, m.end, &key); ok {
					break
				}
			}
		}
		if !ok {
			continue // gone or replaced: try again next dump
		}
		id = synthbpf.SynthSynthBuildId{Size: uint8(len(bid)), Source: bidUser}
		copy(id.Id[:], bid)
		if err := b.objs.BuildIds.Put(&key, &id); err != nil {
			return nil, fmt.Errorf("cache build id: %w", err)
		}
		if len(bid) > 0 {
			d.stats.BuildIDsUser++
			if found == nil {
				found = make(map[fileIdent][]byte)
			}
			found[identOfKey(&key)] = bid
		}
	}
	if err := entries.Err(); err != nil {
		return nil, fmt.Errorf("read pending build ids: %w", err)
	}
	for i := range done {
		b.objs.Pending.Delete(&done[i])
	}
	return found, nil
}

// countCache counts the files in the build-ID cache with an ID, by source.
func (b *BPF) countCache(d *dump) error {
	var (
		key synthbpf.SynthSynthFileKey
		id  synthbpf.SynthSynthBuildId
		it  = b.objs.BuildIds.Iterate()
	)
	for it.Next(&key, &id) {
		switch {
		case id.Size == 0:
		case id.Source == bidBPF:
			d.stats.CachedBPF++
		case id.Source == bidUser:
			d.stats.CachedUser++
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("count build-id cache: %w", err)
	}
	return nil
}

// readMappedBuildID reads the build ID of the file mapped at [start, end)
// in process pid through /proc/PID/map_files, which reaches files in
// other mount namespaces and deleted files, and checks that it is still
// the file the key names. ok is false when it could not be read.
func readMappedBuildID(pid int, start, end uint64, key *synthbpf.SynthSynthFileKey) (id []byte, ok bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, start, end))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, false
	}
	dev := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
	if st.Ino != key.Ino || uint32(dev) != key.Dev {
		return nil, false
	}
	// Not ELF, or malformed (an error): no build ID we can trust.
	id, err = elfnote.BuildID(f, st.Size)
	if err != nil || len(id) > buildIDMax {
		id = nil
	}
	return id, true
}

// buildIDMax is the largest build ID an MMAP2 record holds.
const buildIDMax = 20

// kernelBuildID reads the running kernel's build ID from /sys/kernel/notes.
func kernelBuildID() []byte {
	b, err := os.ReadFile("/sys/kernel/notes")
	if err != nil {
		return nil
	}
	id := elfnote.FromNotes(b, binary.NativeEndian)
	if len(id) > buildIDMax {
		return nil
	}
	return id
}
