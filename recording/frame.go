package recording

import (
	"encoding/binary"
	"hash/crc32"
)

// A file is a sequence of frames. Every frame starts with a 12-byte header:
//
//	0  4  magic "\xa9APW"
//	4  1  frame type
//	5  3  payload length, little endian (at most maxPayload)
//	8  4  CRC32C of bytes 4..8 and of the payload, little endian
//
// The first frame of a file is the header frame. The magic lets a reader
// resynchronise after a damaged frame; the checksum covers the type and the
// length, so a damaged length is caught like a damaged payload.
const (
	frameHeaderLen = 12
	maxPayload     = 1<<24 - 1 // the 3-byte length field
)

var frameMagic = [4]byte{0xa9, 'A', 'P', 'W'}

// Frame types. A reader skips frames of an unknown type with a warning.
const (
	frameHeader  byte = 'H' // the file header (format version, session, event.Meta)
	frameRecords byte = 'R' // records, uncompressed
	frameZstd    byte = 'Z' // records, compressed as one zstd frame
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameSum is the checksum stored in a frame: CRC32C over the type and length
// bytes, then over the payload.
func frameSum(hdr []byte, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, hdr[4:8]), castagnoli, payload)
}

// beginFrame appends a frame header with a placeholder length and checksum
// and returns the extended buffer; finishFrame fills them in once the payload
// has been appended after it.
func beginFrame(buf []byte, typ byte) []byte {
	return append(buf, frameMagic[0], frameMagic[1], frameMagic[2], frameMagic[3], typ, 0, 0, 0, 0, 0, 0, 0)
}

// finishFrame completes the frame that starts at buf[start:]. The payload must
// fit in maxPayload; callers check.
func finishFrame(buf []byte, start int) {
	hdr := buf[start : start+frameHeaderLen]
	n := len(buf) - start - frameHeaderLen
	hdr[5], hdr[6], hdr[7] = byte(n), byte(n>>8), byte(n>>16)
	binary.LittleEndian.PutUint32(hdr[8:12], frameSum(hdr, buf[start+frameHeaderLen:]))
}

// parseFrameHeader returns the type and payload length of a frame header.
// ok is false when the magic is wrong.
func parseFrameHeader(hdr []byte) (typ byte, n int, ok bool) {
	if hdr[0] != frameMagic[0] || hdr[1] != frameMagic[1] || hdr[2] != frameMagic[2] || hdr[3] != frameMagic[3] {
		return 0, 0, false
	}
	return hdr[4], int(hdr[5]) | int(hdr[6])<<8 | int(hdr[7])<<16, true
}

// Records inside a frame payload are: type (1 byte), body length (uvarint),
// body. A reader skips records of an unknown type with a warning, and ignores
// bytes at the end of a known record's body (fields added later).
const (
	recEvent byte = 1 // an event.Event
	recStats byte = 2 // an event.Stats snapshot of the recorded source
	recEnd   byte = 3 // written by Close: the file ends here on purpose
)

// maxRecord bounds one record body (and the header frame); an event is
// about 100 bytes. Writers refuse larger records, readers skip them.
const maxRecord = 1 << 20

// Bounds on what a file may claim, so that a hostile or damaged file costs
// memory and time in proportion to its size (docs/recording.md, "Bounds").
const (
	// maxCPUs bounds the per-CPU lost counters of a stats record (the
	// kernel's NR_CPUS is at most 8192).
	maxCPUs = 1 << 14
	// maxHooks bounds the hooks of a header.
	maxHooks = 4096
	// maxString bounds a string of an event (a comm is 16 bytes, a device
	// name 64, a kernel function name 512).
	maxString = 512
	// maxExpansion bounds what a file's compressed blocks decompress to,
	// in all, as a multiple of their compressed size (real streams: 3 to
	// 22), after the first expansionAllowance bytes.
	maxExpansion       = 64
	expansionAllowance = 16 << 20
	// A file yields at most one record per byte read, after the first
	// recordAllowance (records take at least 2 bytes uncompressed; real
	// compressed streams hold fewer than 0.3 per byte).
	recordAllowance = 1 << 20
	// resyncFactor bounds the bytes checksummed for frames that turn out
	// damaged: this many times the bytes read so far, after the first
	// resyncAllowance. Beyond it the rest of the file is skipped.
	resyncFactor    = 4
	resyncAllowance = 4 * maxPayload
)
