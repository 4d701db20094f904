// Package elfnote reads the GNU build ID of an ELF file: from every
// PT_NOTE segment, then from every SHT_NOTE section, as `readelf -n`
// looks for notes. It reads only what it needs, bounds every size taken
// from the file, skips a note segment or section that does not fit in
// the file instead of giving up, and accepts 32- and 64-bit files of
// either byte order.
package elfnote
