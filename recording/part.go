package recording

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// part is the file of a replay being read: the records of its frames, one
// at a time.
type part struct {
	name    string
	hdr     *Header
	rc      io.Closer
	sc      *scanner
	bootOff int64

	recs    []byte // records left in the current frame
	recsOff int64  // file offset of the current frame
	inBlock bool   // the frame was a compressed block
	lastOff int64  // offset of the last frame read
	events  uint64 // records read, to check against the end record
	stats   uint64
	end     *endRecord // set when the last record read was the end record

	// Work done on this file, bounded in proportion to its size.
	zipped, unzipped int64 // bytes of compressed blocks, and what they decompressed to
	records          int64 // records returned or skipped
	stopped          bool  // a bound was reached: the rest of the file is skipped

	unknownRec map[byte]bool
	unknownFr  map[byte]bool
}

// maxBlock bounds a decompressed block: the writer's largest block plus one
// record.
const maxBlock = maxBlockSize + maxRecord

// record returns the next record of the file: its type, body (valid until
// the next call) and the file offset of the frame holding it.
func (p *part) record(r *Reader) (typ byte, body []byte, off int64, ok bool) {
again:
	if p.stopped {
		return 0, nil, 0, false
	}
	for len(p.recs) == 0 {
		ftyp, payload, foff, ok := p.sc.next()
		if !ok {
			return 0, nil, 0, false
		}
		p.recsOff, p.lastOff, p.inBlock = foff, foff, false
		switch ftyp {
		case frameRecords:
			p.recs = payload
		case frameZstd:
			if r.zdec == nil {
				d, err := zstd.NewReader(nil,
					zstd.WithDecoderConcurrency(1),
					zstd.WithDecoderLowmem(true),
					zstd.WithDecoderMaxMemory(maxBlock),
					zstd.WithDecoderMaxWindow(maxBlock))
				if err != nil {
					r.warn(p.name, foff, fmt.Sprintf("cannot start zstd: %v: block skipped", err))
					continue
				}
				r.zdec = d
			}
			b, err := r.zdec.DecodeAll(payload, r.block[:0])
			if err != nil {
				r.replayErr++
				r.warn(p.name, foff, fmt.Sprintf("compressed block does not decompress (%v): skipped", err))
				continue
			}
			r.block = b
			p.zipped += int64(len(payload))
			p.unzipped += int64(len(b))
			if p.unzipped > maxExpansion*p.zipped+expansionAllowance {
				p.stop(r, foff, fmt.Sprintf("compressed blocks expand more than %d times their size (%d bytes from %d)",
					maxExpansion, p.unzipped, p.zipped))
				return 0, nil, 0, false
			}
			p.recs, p.inBlock = b, true
		case frameHeader:
			if h, err := decodeHeader(payload); err != nil || h.Session != p.hdr.Session {
				r.warn(p.name, foff, "header of another recording inside the file ignored: replay concatenated recordings as separate files")
			}
		default:
			if !p.unknownFr[ftyp] {
				p.unknownFr[ftyp] = true
				r.warn(p.name, foff, fmt.Sprintf("frame of unknown type %q skipped (written by a newer apmwatch?); later ones are skipped silently", ftyp))
			}
		}
	}
	p.end = nil
	p.records++
	if p.records > p.sc.offset()+recordAllowance {
		p.stop(r, p.recsOff, fmt.Sprintf("more than one record per byte of file (%d records in %d bytes)", p.records, p.sc.offset()))
		return 0, nil, 0, false
	}
	typ = p.recs[0]
	n, k := binary.Uvarint(p.recs[1:])
	if k <= 0 || n > uint64(len(p.recs)-1-k) {
		r.replayErr++
		r.warn(p.name, p.recsOff, "record runs past the end of its frame: rest of the frame skipped")
		p.recs = nil
		goto again
	}
	body = p.recs[1+k : 1+k+int(n)]
	p.recs = p.recs[1+k+int(n):]
	if n > maxRecord {
		r.replayErr++
		r.warn(p.name, p.recsOff, fmt.Sprintf("record of %d bytes, more than %d: skipped", n, maxRecord))
		goto again
	}
	return typ, body, p.recsOff, true
}

// stop gives up the rest of the file when it asks for more work than its
// size allows: said once, counted as a decode error.
func (p *part) stop(r *Reader, off int64, why string) {
	p.stopped, p.recs = true, nil
	r.replayErr++
	r.warn(p.name, off, why+": rest of the file skipped")
}

// finish checks, at the end of the file, that it ended on purpose and holds
// what its end record says.
func (p *part) finish(r *Reader) {
	sc := p.sc
	if sc.cut || sc.readErr != nil || p.stopped || sc.gaveUp {
		return // already said
	}
	if p.end == nil {
		if sc.damaged == 0 { // a damaged tail was already reported
			r.warn(p.name, sc.offset(), "no end record: the writer did not close the file (killed, or still writing); it may be cut here")
		}
		return
	}
	if p.end.events != p.events || p.end.stats != p.stats {
		r.warn(p.name, p.lastOff, fmt.Sprintf("end record counts %d events and %d stats, %d and %d were read",
			p.end.events, p.end.stats, p.events, p.stats))
	}
}

func (p *part) close() error {
	if err := p.rc.Close(); err != nil {
		return fmt.Errorf("closing recording %s: %w", p.name, err)
	}
	return nil
}
