package synth

import (
	"context"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/internal/method/procmethod"
	"github.com/synth-dev/synth/perfdata"
)

// ErrNoProcquery is OpenMethod's error for MethodProcquery on a kernel
// without the PROCMAP_QUERY ioctl (before Linux 6.11).
var ErrNoProcquery = procmethod.ErrNoProcquery

// withAttrs is a method of internal/method (which knows no attrs)
// with the attrs its records are written under: a dumper.
type withAttrs struct {
	m interface {
		Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error)
		Close() error
	}
	attrs []perfdata.EventAttr
}

func (c withAttrs) Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error) {
	return c.m.Dump(ctx, emit)
}

func (c withAttrs) Attrs() []perfdata.EventAttr { return c.attrs }
func (c withAttrs) Close() error                { return c.m.Close() }

// setOptions changes what the method's next dumps read and write (see
// config.Resolved.WithLoaded); ok is false for a method that cannot.
func (c withAttrs) setOptions(d config.Resolved) (withAttrs, bool) {
	s, ok := c.m.(interface {
		SetOptions(config.Resolved) config.Resolved
	})
	if !ok {
		return c, false
	}
	c.attrs = optionAttrs(s.SetOptions(d))
	return c, true
}

// optionAttrs are the attrs of a method that writes under d's attr
// (Options.Attr).
func optionAttrs(d config.Resolved) []perfdata.EventAttr {
	return []perfdata.EventAttr{{Attr: d.Attr(), Name: attrName}}
}

// newBPF is the BPF method without the live side-band.
func newBPF(d config.Resolved) (dumper, error) {
	b, err := bpfmethod.New(d)
	if err != nil {
		return nil, err
	}
	return withAttrs{m: b, attrs: optionAttrs(d)}, nil
}

// newProcmaps is the method that parses /proc/PID/maps, with threads
// workers.
func newProcmaps(d config.Resolved, threads int) (dumper, error) {
	m, err := procmethod.NewProcmaps(d, threads)
	if err != nil {
		return nil, err
	}
	return withAttrs{m: m, attrs: optionAttrs(d)}, nil
}

// newProcquery is the method that asks the kernel for each process's
// mappings with the PROCMAP_QUERY ioctl, with threads workers.
func newProcquery(d config.Resolved, threads int) (dumper, error) {
	m, err := procmethod.NewProcquery(d, threads)
	if err != nil {
		return nil, err
	}
	return withAttrs{m: m, attrs: optionAttrs(d)}, nil
}

// walk is the BPF method's walk, for Method.Walk.
func (c withAttrs) walk() (Walk, error) {
	if b, ok := c.m.(*bpfmethod.BPF); ok {
		return b.Walk()
	}
	return "", nil
}
