package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/synth-dev/synth/synth"
)

// switchFlag is --switch-output[=signal|SIZE|TIME], as perf record
// takes it: alone it means signal (SIGUSR2); SIZE ends in B, K, M or G,
// TIME in s, m, h or d.
type switchFlag struct {
	set    bool
	signal bool
	size   int64
	every  time.Duration
}

func (f *switchFlag) IsBoolFlag() bool { return true }

// Type is the kind of value the help names.
func (f *switchFlag) Type() string { return "signal|size|time" }

func (f *switchFlag) String() string {
	switch {
	case f == nil || !f.set:
		return ""
	case f.size > 0:
		return strconv.FormatInt(f.size, 10) + "B"
	case f.every > 0:
		return f.every.String()
	}
	return "signal"
}

var (
	sizeUnits = map[string]int64{"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
	timeUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
)

func (f *switchFlag) Set(v string) error {
	*f = switchFlag{set: true}
	if v == "true" || v == "signal" {
		f.signal = true
		return nil
	}
	if len(v) < 2 {
		return fmt.Errorf("want signal, a size (10M) or a time (30s), not %q", v)
	}
	// Case matters, as for perf: 10M is a size, 10m a time.
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	unit := v[len(v)-1:]
	if err != nil || n <= 0 {
		return fmt.Errorf("want signal, a size (10M) or a time (30s), not %q", v)
	}
	if m, ok := sizeUnits[unit]; ok && n <= math.MaxInt64/m {
		f.size = n * m
		return nil
	}
	if d, ok := timeUnits[unit]; ok && n <= math.MaxInt64/int64(d) {
		f.every = time.Duration(n) * d
		return nil
	}
	if _, ok := sizeUnits[unit]; ok {
		return fmt.Errorf("%q: too large", v)
	}
	if _, ok := timeUnits[unit]; ok {
		return fmt.Errorf("%q: too long", v)
	}
	return fmt.Errorf("%q: a size ends in B, K, M or G, a time in s, m, h or d", v)
}

// options maps the flag onto the library's, with sig the channel
// SIGUSR2 is delivered to: in a mode other than signal, what it receives
// is dropped.
func (f *switchFlag) options(sig chan os.Signal) synth.SwitchOptions {
	o := synth.SwitchOptions{Size: f.size, Every: f.every}
	if f.signal {
		o.Signal = sig
	}
	return o
}
