package bpfmethod

// The live side of the rings, for a Session: it polls the side-band
// rings, takes the kernel's live records through SetLive, and tells the
// deduper about them so that a dump drops what the live stream reported
// first.

// LiveFDs returns the side-band events' descriptors, to poll.
func (b *BPF) LiveFDs() []int { return b.rings.liveFDs() }

// IDs returns the ids of the side-band events and of the sampling
// events, as their records carry them.
func (b *BPF) IDs() (live, samplers []uint64) { return b.rings.ids() }

// SetSamplers starts the sampling events (opened stopped), or stops
// them: the rings then receive no more samples, and a drain empties
// them.
func (b *BPF) SetSamplers(on bool) error { return b.rings.enableSamplers(on) }

// SetLive sets where the records of the rings that the programs did not
// emit go: the kernel's live records and samples, in each CPU's order.
func (b *BPF) SetLive(live func(rec []byte) error) { b.round.live = live }

// Gen returns the generation of the last dump started.
func (b *BPF) Gen() uint64 { return b.gen }

// DrainLive empties the rings between dumps, handing the live records
// to the function SetLive set. It returns how many records of the
// programs it found, left over from a dump that was stopped (stale), and
// how many the rings lost.
func (b *BPF) DrainLive() (stale int, lost uint64, err error) {
	r := &b.round
	if err := b.drain(r); err != nil {
		return 0, 0, err
	}
	stale, lost = len(r.recs), r.lost
	r.lost = 0
	return stale, lost, nil
}

// NoteLive tells the deduper of a live record of time t that a dump
// running now must not report again.
func (b *BPF) NoteLive(rec []byte, t uint64) { b.dd.AddLive(rec, t) }

// GenOf returns the generation a live record of time t belongs to: that
// of the last dump started before it.
func (b *BPF) GenOf(t uint64) uint64 { return b.dd.GenOf(t) }
