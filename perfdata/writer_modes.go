package perfdata

import (
	"fmt"
	"io"
	"slices"
)

// startPipe writes the pipe header, the attrs and the features, then
// perf 6.1's end-of-features marker.
func (w *Writer) startPipe() error {
	b := append([]byte(magic), make([]byte, 8)...)
	le.PutUint64(b[8:], pipeHeaderSize)
	for _, a := range w.attrs {
		var at int
		b, at = startRecord(b, RecordHeaderAttr, 0)
		b = a.Attr.Append(b)
		for _, id := range a.IDs {
			b = le.AppendUint64(b, id)
		}
		b = finishRecord(b, at, 0, nil)
	}
	for _, f := range w.features {
		b = featureRecord(b, f)
	}
	if !hasFeature(w.features, FeatSampleTime) {
		// Written before any sample, as perf writes it in pipe mode.
		b = featureRecord(b, sampleTimeFeature(0, 0))
	}
	b = featureRecord(b, Feature{ID: FeatLast})
	return w.write(b)
}

// featureRecord appends PERF_RECORD_HEADER_FEATURE: header, u64 feat_id,
// the section body.
func featureRecord(b []byte, f Feature) []byte {
	b, at := startRecord(b, RecordHeaderFeature, 0)
	b = le.AppendUint64(b, uint64(f.ID))
	b = append(b, f.Data...)
	return finishRecord(b, at, 0, nil)
}

// startFile writes the header with an empty data section, the attrs and
// their ids. A file that is never closed reads as one whose data size
// is 0, which perf reports as not properly terminated.
func (w *Writer) startFile() error {
	attrsOff := int64(fileHeaderSize)
	idsOff := attrsOff + int64(len(w.attrs))*fileAttrSize
	var ids []byte
	var attrs []byte
	for _, a := range w.attrs {
		attrs = a.Attr.Append(attrs)
		attrs = le.AppendUint64(attrs, uint64(idsOff)+uint64(len(ids)))
		attrs = le.AppendUint64(attrs, uint64(len(a.IDs)*8))
		for _, id := range a.IDs {
			ids = le.AppendUint64(ids, id)
		}
	}
	w.dataOff = idsOff + int64(len(ids))
	b := w.fileHeader(nil, 0, nil)
	b = append(b, attrs...)
	return w.write(append(b, ids...))
}

// fileHeader appends struct perf_file_header.
func (w *Writer) fileHeader(b []byte, dataSize int64, feats []Feature) []byte {
	b = append(b, magic...)
	b = le.AppendUint64(b, fileHeaderSize)
	b = le.AppendUint64(b, fileAttrSize)
	b = le.AppendUint64(b, fileHeaderSize)
	b = le.AppendUint64(b, uint64(len(w.attrs))*fileAttrSize)
	b = le.AppendUint64(b, uint64(w.dataOff))
	b = le.AppendUint64(b, uint64(dataSize))
	b = le.AppendUint64(b, 0) // event_types: unused since perf 2.6
	b = le.AppendUint64(b, 0)
	var bits [featBits / 64]uint64
	for _, f := range feats {
		bits[f.ID/64] |= 1 << (f.ID % 64)
	}
	for _, v := range bits {
		b = le.AppendUint64(b, v)
	}
	return b
}

// sortedFeatures returns the features to write, in id order, one per id
// (the last one given wins).
func (w *Writer) sortedFeatures() []Feature {
	fs := slices.Clone(w.features)
	if len(w.buildIDs) > 0 {
		fs = append(fs, Feature{ID: FeatBuildID, Data: w.buildIDs})
	}
	if !hasFeature(fs, FeatSampleTime) {
		fs = append(fs, sampleTimeFeature(w.firstSample, w.lastSample))
	}
	slices.SortStableFunc(fs, func(a, b Feature) int { return int(a.ID - b.ID) })
	var out []Feature
	for i, f := range fs {
		if f.ID <= 0 || f.ID >= FeatLast {
			continue
		}
		if i+1 < len(fs) && fs[i+1].ID == f.ID {
			continue
		}
		out = append(out, f)
	}
	return out
}

// finishFile writes the feature index and sections after the data and
// rewrites the header with the data size and feature bits. The data is
// all written out already.
func (w *Writer) finishFile() {
	feats := w.sortedFeatures()
	off := w.dataOff + w.dataSize + int64(len(feats))*sectionSize
	var b []byte
	for _, f := range feats {
		b = le.AppendUint64(b, uint64(off))
		b = le.AppendUint64(b, uint64(len(f.Data)))
		off += int64(len(f.Data))
	}
	for _, f := range feats {
		b = append(b, f.Data...)
	}
	w.dataDone = true
	w.buf = append(w.buf, b...)
	if w.flush() != nil {
		return
	}
	if err := w.patchHeader(w.dataSize, feats); err != nil {
		w.err = err
	}
}

// patchHeader rewrites the header in place: it takes no new space, so
// it succeeds on a full disk.
func (w *Writer) patchHeader(dataSize int64, feats []Feature) error {
	ws := w.out.(io.WriteSeeker)
	if _, err := ws.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("patch perf.data header: %w", err)
	}
	if _, err := ws.Write(w.fileHeader(nil, dataSize, feats)); err != nil {
		return fmt.Errorf("patch perf.data header: %w", err)
	}
	if _, err := ws.Seek(0, io.SeekEnd); err != nil {
		return fmt.Errorf("patch perf.data header: %w", err)
	}
	return nil
}

// salvage makes a file whose writing failed (a full disk, an I/O error)
// a valid perf.data of the records that reached it whole: it cuts off
// what follows them (a part of a record, feature sections) when out can
// be truncated, and patches the header with their size and no features.
// It keeps the write error: the file is valid, but not all there.
func (w *Writer) salvage() {
	if w.landed < w.dataOff {
		return // not even the attrs are there
	}
	if t, ok := w.out.(interface{ Truncate(int64) error }); ok {
		if err := t.Truncate(w.dataOff + w.whole); err != nil {
			return
		}
	} else if w.landed != w.dataOff+w.whole {
		return // a partial record stays: leave the header unpatched
	}
	w.patchHeader(w.whole, nil)
}
