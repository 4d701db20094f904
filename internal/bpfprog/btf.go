package bpfprog

import (
	"bytes"
	"fmt"
)

// FormatError reports BTF that cannot be read: what is wrong and where,
// as an offset into the raw BTF.
type FormatError struct {
	Off int64
	Msg string
}

func (e *FormatError) Error() string { return fmt.Sprintf("BTF at offset %d: %s", e.Off, e.Msg) }

// btfMagic opens struct btf_header (include/uapi/linux/btf.h): u16 magic,
// u8 version, u8 flags, u32 hdr_len, type_off, type_len, str_off,
// str_len; the offsets count from the end of the header.
const (
	btfMagic      = 0xeb9f
	btfHeaderSize = 24
	btfTypeSize   = 12 // struct btf_type: u32 name_off, info, size or type
)

// btfExtra is the size of the data after a struct btf_type of each kind
// (BTF_KIND_*), per member (vlen) or fixed; -1 for kinds with none.
var btfExtra = [...]struct{ fixed, perMember int }{
	0:  {-1, 0}, // UNKN: not a valid kind
	1:  {4, 0},  // INT: encoding
	2:  {0, 0},  // PTR
	3:  {12, 0}, // ARRAY: struct btf_array
	4:  {0, 12}, // STRUCT: struct btf_member
	5:  {0, 12}, // UNION
	6:  {0, 8},  // ENUM: struct btf_enum
	7:  {0, 0},  // FWD
	8:  {0, 0},  // TYPEDEF
	9:  {0, 0},  // VOLATILE
	10: {0, 0},  // CONST
	11: {0, 0},  // RESTRICT
	12: {0, 0},  // FUNC
	13: {0, 8},  // FUNC_PROTO: struct btf_param
	14: {4, 0},  // VAR: struct btf_var
	15: {0, 12}, // DATASEC: struct btf_var_secinfo
	16: {0, 0},  // FLOAT
	17: {4, 0},  // DECL_TAG: struct btf_decl_tag
	18: {0, 0},  // TYPE_TAG
	19: {0, 12}, // ENUM64: struct btf_enum64
}

// btfNames returns the names of the types ids of raw BTF, the way
// bpftool and perf look a function up: walking the type section to the
// id, then reading its name_off in the string section. It reads only
// the headers of the types up to the largest id, far less than decoding
// the whole BTF.
func btfNames(raw []byte, ids []uint32) ([]string, error) {
	if len(raw) < btfHeaderSize || ne.Uint16(raw) != btfMagic {
		return nil, &FormatError{0, "no BTF header"}
	}
	hdr := int64(ne.Uint32(raw[4:]))
	typeOff, typeLen := hdr+int64(ne.Uint32(raw[8:])), int64(ne.Uint32(raw[12:]))
	strOff, strLen := hdr+int64(ne.Uint32(raw[16:])), int64(ne.Uint32(raw[20:]))
	size := int64(len(raw))
	if hdr < btfHeaderSize || typeOff+typeLen > size || strOff+strLen > size {
		return nil, &FormatError{4, "sections past the end of the BTF"}
	}
	types, strs := raw[typeOff:typeOff+typeLen], raw[strOff:strOff+strLen]
	var last uint32
	for _, id := range ids {
		last = max(last, id)
	}
	// offs[i] is where type i+1 starts in types; the size of the
	// types bounds how many there can be.
	offs := make([]int, 0, min(int(last), len(types)/btfTypeSize))
	for off := 0; uint32(len(offs)) < last; {
		if off+btfTypeSize > len(types) {
			return nil, &FormatError{typeOff + int64(off), fmt.Sprintf("type %d past the end of the types", len(offs)+1)}
		}
		info := ne.Uint32(types[off+4:])
		kind, vlen := info>>24&0x1f, int(info&0xffff)
		if int(kind) >= len(btfExtra) || btfExtra[kind].fixed < 0 {
			return nil, &FormatError{typeOff + int64(off) + 4, fmt.Sprintf("type %d of unknown kind %d", len(offs)+1, kind)}
		}
		offs = append(offs, off)
		off += btfTypeSize + btfExtra[kind].fixed + vlen*btfExtra[kind].perMember
	}
	names := make([]string, len(ids))
	for i, id := range ids {
		if id == 0 {
			return nil, &FormatError{typeOff, "type id 0"}
		}
		at := int64(ne.Uint32(types[offs[id-1]:]))
		if at >= strLen {
			return nil, &FormatError{typeOff + int64(offs[id-1]), fmt.Sprintf("type %d: name past the strings", id)}
		}
		end := bytes.IndexByte(strs[at:], 0)
		if end < 0 {
			return nil, &FormatError{strOff + at, fmt.Sprintf("type %d: name not NUL-terminated", id)}
		}
		names[i] = string(strs[at : at+int64(end)])
	}
	return names, nil
}
