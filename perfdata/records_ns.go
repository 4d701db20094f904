package perfdata

// Namespace indexes of a NAMESPACES record (NET_NS_INDEX ...
// CGROUP_NS_INDEX in include/uapi/linux/perf_event.h).
const (
	NetNS = iota
	UTSNS
	IPCNS
	PidNS
	UserNS
	MntNS
	CgroupNS
	NumNS // NR_NAMESPACES
)

// maxNamespaces bounds the namespace count read from a record.
const maxNamespaces = 64

// NSLink mirrors struct perf_ns_link_info: the device and inode of a
// namespace file, as stat(2) of /proc/PID/ns/NAME gives them.
type NSLink struct{ Dev, Ino uint64 }

// Namespaces mirrors PERF_RECORD_NAMESPACES: u32 pid, tid; u64
// nr_namespaces; struct perf_ns_link_info link_info[nr_namespaces].
type Namespaces struct {
	Pid, Tid uint32
	Links    []NSLink // indexed by NetNS ... CgroupNS
}

// Append appends the record; see Mmap.Append.
func (n *Namespaces) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, RecordNamespaces, 0)
	b = le.AppendUint32(b, n.Pid)
	b = le.AppendUint32(b, n.Tid)
	b = le.AppendUint64(b, uint64(len(n.Links)))
	for _, l := range n.Links {
		b = le.AppendUint64(b, l.Dev)
		b = le.AppendUint64(b, l.Ino)
	}
	return finishRecord(b, at, sampleType, sid)
}

// ParseNamespaces decodes a PERF_RECORD_NAMESPACES; see ParseMmap for
// sampleType. The record must hold exactly its nr_namespaces links.
func ParseNamespaces(rec []byte, sampleType uint64) (Namespaces, SampleID, error) {
	p, _, err := body(rec, RecordNamespaces, sampleType, 16)
	if err != nil {
		return Namespaces{}, SampleID{}, err
	}
	n := Namespaces{Pid: le.Uint32(p), Tid: le.Uint32(p[4:])}
	nr := le.Uint64(p[8:])
	if nr > maxNamespaces || nr*16 != uint64(len(p)-16) {
		return n, SampleID{}, errorf(headerSize+8, "%d namespaces in a record of %d bytes", nr, len(rec))
	}
	n.Links = make([]NSLink, nr)
	for i := range n.Links {
		o := 16 + 16*i
		n.Links[i] = NSLink{Dev: le.Uint64(p[o:]), Ino: le.Uint64(p[o+8:])}
	}
	sid, err := ParseSampleID(rec, sampleType)
	return n, sid, err
}

// Cgroup mirrors PERF_RECORD_CGROUP: u64 id; char path[]. The id is the
// cgroup's kernfs node id, the handle name_to_handle_at(2) returns for
// its directory; the path is relative to the cgroup2 mount, "/" for its
// root.
type Cgroup struct {
	ID   uint64
	Path string
}

// Append appends the record; see Mmap.Append.
func (c *Cgroup) Append(b []byte, sampleType uint64, sid *SampleID) []byte {
	b, at := startRecord(b, RecordCgroup, 0)
	b = le.AppendUint64(b, c.ID)
	b = appendString(b, c.Path)
	return finishRecord(b, at, sampleType, sid)
}

// ParseCgroup decodes a PERF_RECORD_CGROUP; see ParseMmap for sampleType.
func ParseCgroup(rec []byte, sampleType uint64) (Cgroup, SampleID, error) {
	p, _, err := body(rec, RecordCgroup, sampleType, 8+1)
	if err != nil {
		return Cgroup{}, SampleID{}, err
	}
	c := Cgroup{ID: le.Uint64(p)}
	if c.Path, err = cString(p[8:], headerSize+8); err != nil {
		return c, SampleID{}, err
	}
	sid, err := ParseSampleID(rec, sampleType)
	return c, sid, err
}
