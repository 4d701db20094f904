package bpf

import (
	"crypto/sha256"
	"sync"
)

// SynthHash returns the SHA-256 of the embedded Synth object: what
// synth learns of a kernel by loading it (internal/kcache) holds for
// this object only.
var SynthHash = sync.OnceValue(func() [32]byte { return sha256.Sum256(_SynthBytes) })
