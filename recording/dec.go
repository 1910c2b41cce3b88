package recording

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

var errShort = errors.New("record too short")

// dec reads the fields of one record body. It never panics: a read past the
// end, or a value too large for its field, sets err and returns zero values,
// so decoders read every field and check err once at the end.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *dec) u8() uint8 {
	if len(d.b) < 1 {
		d.fail(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) bool() bool { return d.u8() != 0 }

func (d *dec) u16le() uint16 {
	if len(d.b) < 2 {
		d.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func (d *dec) u32le() uint32 {
	if len(d.b) < 4 {
		d.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *dec) u64le() uint64 {
	if len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

// u16 and u32 read uvarints that must fit the field they fill.
func (d *dec) u16() uint16 {
	v := d.uvarint()
	if v > math.MaxUint16 {
		d.fail(errors.New("value out of range"))
		return 0
	}
	return uint16(v)
}

func (d *dec) u32() uint32 {
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.fail(errors.New("value out of range"))
		return 0
	}
	return uint32(v)
}

func (d *dec) i32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail(errors.New("value out of range"))
		return 0
	}
	return int32(v)
}

// bytes returns the next n bytes, aliasing the input.
func (d *dec) bytes(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// sub returns a decoder over the next length-prefixed part.
func (d *dec) sub() dec {
	return dec{b: d.bytes(d.uvarint())}
}

// str reads a string of an event: at most maxString bytes.
func (d *dec) str(in *interner) string {
	n := d.uvarint()
	if n > maxString {
		d.fail(fmt.Errorf("string of %d bytes, more than %d", n, maxString))
		return ""
	}
	b := d.bytes(n)
	if in == nil {
		return string(b)
	}
	return in.get(b)
}

// text reads a string of the header, which is bounded by the header's
// size (maxRecord) only.
func (d *dec) text() string { return string(d.bytes(d.uvarint())) }

// interner shares the strings that repeat in a recording (device names,
// commands, hook names) so a replay does not allocate them per event.
type interner struct {
	m map[string]string
}

const maxInterned = 4096

func (in *interner) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if len(in.m) < maxInterned && len(b) <= 64 {
		in.m[s] = s
	}
	return s
}

// Encoding helpers. Appending never fails.

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// reserveLen appends a one-byte length placeholder; endLen fills it in with
// the uvarint length of everything appended after it, moving that data if
// the length needs more than one byte.
func reserveLen(b []byte) ([]byte, int) {
	return append(b, 0), len(b)
}

func endLen(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	var tmp [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(tmp[:], uint64(n))
	b = append(b, tmp[:k-1]...) // grow by k-1
	copy(b[at+k:], b[at+1:at+1+n])
	copy(b[at:], tmp[:k])
	return b
}
