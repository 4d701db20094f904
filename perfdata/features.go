package perfdata

// Feature is one feature section: its id (Feat*) and its body, encoded
// as in a perf.data file (tools/perf/util/header.c).
type Feature struct {
	ID   FeatureID
	Data []byte
}

// nameAlign is NAME_ALIGN of tools/perf/util/header.h: perf strings and
// build-id file names are padded to it.
const nameAlign = 64

// appendPerfString appends struct perf_header_string: u32 len, then the
// string NUL-padded to len, len a multiple of 64 that holds the NUL.
func appendPerfString(b []byte, s string) []byte {
	n := (len(s) + 1 + nameAlign - 1) / nameAlign * nameAlign
	b = le.AppendUint32(b, uint32(n))
	b = append(b, s...)
	return append(b, make([]byte, n-len(s))...)
}

// StringFeature is a feature whose body is one perf string (HOSTNAME,
// OSRELEASE, VERSION, ARCH, CPUDESC, CPUID).
func StringFeature(id FeatureID, s string) Feature {
	return Feature{ID: id, Data: appendPerfString(nil, s)}
}

// NrCPUsFeature is HEADER_NRCPUS: u32 nr_cpus_avail, u32 nr_cpus_online.
func NrCPUsFeature(avail, online uint32) Feature {
	return Feature{ID: FeatNrCPUs, Data: le.AppendUint32(le.AppendUint32(nil, avail), online)}
}

// CmdlineFeature is HEADER_CMDLINE: u32 nr, then nr perf strings.
func CmdlineFeature(args []string) Feature {
	b := le.AppendUint32(nil, uint32(len(args)))
	for _, a := range args {
		b = appendPerfString(b, a)
	}
	return Feature{ID: FeatCmdline, Data: b}
}

// EventDescFeature is HEADER_EVENT_DESC: u32 nr, u32 attr_size, then per
// event: attr, u32 nr_ids, perf string name, u64 ids[nr_ids].
func EventDescFeature(descs []EventAttr) Feature {
	b := le.AppendUint32(nil, uint32(len(descs)))
	b = le.AppendUint32(b, AttrSize)
	for _, d := range descs {
		b = d.Attr.Append(b)
		b = le.AppendUint32(b, uint32(len(d.IDs)))
		b = appendPerfString(b, d.Name)
		for _, id := range d.IDs {
			b = le.AppendUint64(b, id)
		}
	}
	return Feature{ID: FeatEventDesc, Data: b}
}
