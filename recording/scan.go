package recording

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// scanner reads the valid frames of one file in order. Damaged stretches are
// skipped: it resynchronises on the next frame magic whose frame checks out,
// and reports each stretch once through warn. It reads through a window that
// grows to the largest frame seen, so memory stays bounded on any input.
type scanner struct {
	r    io.Reader
	warn func(off int64, msg string)

	buf      []byte
	pos, end int   // unread bytes are buf[pos:end]
	base     int64 // file offset of buf[0]
	eof      bool
	readErr  error
	cut      bool    // the file ends inside a frame
	damaged  int     // damaged stretches skipped
	errs     *uint64 // also counts them when set (the replay's DecodeErrs)
	finished bool
	wasted   int64 // bytes checksummed for frames that did not check out
	gaveUp   bool  // resynchronisation took too much work: the rest was skipped
}

const scanBuffer = 64 << 10

func newScanner(r io.Reader, warn func(int64, string)) *scanner {
	return &scanner{r: r, warn: warn, buf: make([]byte, 4<<10)}
}

// offset is the file offset of the next unread byte.
func (s *scanner) offset() int64 { return s.base + int64(s.pos) }

// fill tries to make n bytes available at pos and returns how many are.
func (s *scanner) fill(n int) int {
	for s.end-s.pos < n && !s.eof {
		if len(s.buf)-s.pos < n {
			// Out of room: move the unread bytes to the front, into a
			// bigger buffer while ramping up to scanBuffer (small inputs
			// stay cheap) or when a frame needs more.
			size := len(s.buf)
			if size < scanBuffer {
				size = min(2*size, scanBuffer)
			}
			size = max(size, n)
			dst := s.buf
			if size > len(s.buf) {
				dst = make([]byte, size)
			}
			copy(dst, s.buf[s.pos:s.end])
			s.buf = dst
			s.base += int64(s.pos)
			s.end -= s.pos
			s.pos = 0
		}
		m, err := s.r.Read(s.buf[s.end:])
		s.end += m
		if err != nil {
			s.eof = true
			if err != io.EOF {
				s.readErr = err
			}
		}
	}
	return s.end - s.pos
}

// check looks at the frame that would start at pos. It returns the frame
// length (header included) when it is whole and its checksum matches;
// otherwise n is 0 and why says what is wrong. short means the input ends
// before the frame does.
func (s *scanner) check() (typ byte, n int, why string, short bool) {
	avail := s.fill(frameHeaderLen)
	if avail < frameHeaderLen {
		if bytes.HasPrefix(frameMagic[:], s.buf[s.pos:s.end][:min(avail, 4)]) {
			return 0, 0, "frame runs past the end of the file", true
		}
		return 0, 0, "no frame magic", false
	}
	typ, plen, ok := parseFrameHeader(s.buf[s.pos : s.pos+frameHeaderLen])
	if !ok {
		return 0, 0, "no frame magic", false
	}
	if s.fill(frameHeaderLen+plen) < frameHeaderLen+plen {
		return 0, 0, "frame runs past the end of the file", true
	}
	fr := s.buf[s.pos : s.pos+frameHeaderLen+plen]
	if binary.LittleEndian.Uint32(fr[8:12]) != frameSum(fr, fr[frameHeaderLen:]) {
		s.wasted += int64(plen)
		return 0, 0, "checksum mismatch", false
	}
	return typ, frameHeaderLen + plen, "", false
}

// next returns the next valid frame: its type, its payload (valid until the
// following call) and its file offset. ok is false at the end of the input.
func (s *scanner) next() (typ byte, payload []byte, off int64, ok bool) {
	if s.finished {
		return 0, nil, 0, false
	}
	bad := int64(-1) // start of the damaged stretch being skipped
	var badWhy string
	badShort := false // the stretch starts with a frame the input cuts
	for {
		typ, n, why, short := s.check()
		if n > 0 {
			off = s.offset()
			if bad >= 0 {
				s.countDamage()
				s.warn(bad, fmt.Sprintf("damaged frame (%s): skipped %d bytes to the next frame at offset %d", badWhy, off-bad, off))
			}
			payload = s.buf[s.pos+frameHeaderLen : s.pos+n]
			s.pos += n
			return typ, payload, off, true
		}
		if s.end == s.pos && s.eof {
			break
		}
		if bad < 0 {
			bad, badWhy, badShort = s.offset(), why, short
		}
		if s.wasted > resyncFactor*s.offset()+resyncAllowance {
			// Frame headers one after another, each claiming a long
			// payload, would be checksummed over and over.
			s.gaveUp = true
			s.countDamage()
			s.warn(bad, fmt.Sprintf("damaged frame (%s): resynchronising checked %d bytes of false frames by offset %d: rest of the file skipped",
				badWhy, s.wasted, s.offset()))
			s.finished = true
			return 0, nil, 0, false
		}
		s.skipToMagic()
	}
	s.finished = true
	if s.readErr != nil {
		s.warn(s.offset(), fmt.Sprintf("read error, stopping: %v", s.readErr))
		return 0, nil, 0, false
	}
	if bad >= 0 {
		if badShort {
			s.cut = true
			s.warn(bad, fmt.Sprintf("file cut inside a frame: last %d bytes ignored", s.offset()-bad))
		} else {
			s.countDamage()
			s.warn(bad, fmt.Sprintf("damaged frame (%s): skipped %d bytes to the end of the file", badWhy, s.offset()-bad))
		}
	}
	return 0, nil, 0, false
}

// skipToMagic moves pos to the next occurrence of the frame magic after pos,
// or as far as the input goes.
func (s *scanner) skipToMagic() {
	s.pos++
	for {
		if i := bytes.Index(s.buf[s.pos:s.end], frameMagic[:]); i >= 0 {
			s.pos += i
			return
		}
		// Keep the last bytes: they may be the start of a magic.
		if keep := len(frameMagic) - 1; s.end-s.pos > keep {
			s.pos = s.end - keep
		}
		if s.eof {
			s.pos = s.end
			return
		}
		s.fill(s.end - s.pos + scanBuffer/2)
	}
}

func (s *scanner) countDamage() {
	s.damaged++
	if s.errs != nil {
		*s.errs++
	}
}
