package perfdata

import "errors"

// ErrUnknownType is returned by Decode for a record type it has no
// struct for; the record itself may be well formed.
var ErrUnknownType = errors.New("perfdata: no decoder for the record type")

// Decode decodes a record of an event of attr a into the struct of its
// type, returned by value: Mmap, Mmap2, Comm, Fork, Exit, Lost,
// Throttle, Sample, LostSamples, Switch, Namespaces, Ksymbol, BPFEvent or
// Cgroup. Records other than samples have their sample_id_all trailer
// decoded when a has sample_id_all. A type without a struct gives
// ErrUnknownType.
func Decode(rec []byte, a *Attr) (any, SampleID, error) {
	h, err := ParseHeader(rec)
	if err != nil {
		return nil, SampleID{}, err
	}
	var st uint64
	if a.Flags&AttrSampleIDAll != 0 {
		st = a.SampleType
	}
	switch h.Type {
	case RecordSample:
		s, err := ParseSample(rec, a)
		return s, SampleID{}, err
	case RecordMmap:
		return decoded(ParseMmap(rec, st))
	case RecordMmap2:
		return decoded(ParseMmap2(rec, st))
	case RecordComm:
		return decoded(ParseComm(rec, st))
	case RecordFork:
		return decoded(ParseFork(rec, st))
	case RecordExit:
		return decoded(ParseExit(rec, st))
	case RecordLost:
		return decoded(ParseLost(rec, st))
	case RecordThrottle, RecordUnthrottle:
		return decoded(ParseThrottle(rec, st))
	case RecordLostSamples:
		return decoded(ParseLostSamples(rec, st))
	case RecordSwitch, RecordSwitchCPUWide:
		return decoded(ParseSwitch(rec, st))
	case RecordNamespaces:
		return decoded(ParseNamespaces(rec, st))
	case RecordKsymbol:
		return decoded(ParseKsymbol(rec, st))
	case RecordBPFEvent:
		return decoded(ParseBPFEvent(rec, st))
	case RecordCgroup:
		return decoded(ParseCgroup(rec, st))
	}
	return nil, SampleID{}, ErrUnknownType
}

func decoded[T any](v T, sid SampleID, err error) (any, SampleID, error) {
	if err != nil {
		return nil, SampleID{}, err
	}
	return v, sid, nil
}
