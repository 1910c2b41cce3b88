// Package recordingtest builds hostile recordings for tests and
// benchmarks: files that follow docs/recording.md to the letter and use
// every count and length it allows against the reader. Frames are built
// here from the documented layout, not with package recording's encoder,
// so the files say what a stranger's tool could write; events come from
// the public recording.Writer where valid ones are wanted. Imported by
// tests only.
package recordingtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
	"github.com/klauspost/compress/zstd"
)

// MaxPayload is the largest frame payload the 3-byte length field allows.
const MaxPayload = 1<<24 - 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frame is one frame: magic, type, 3-byte length, CRC32C of type, length
// and payload.
func Frame(typ byte, payload []byte) []byte {
	b := []byte{0xa9, 'A', 'P', 'W', typ, byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), 0, 0, 0, 0}
	sum := crc32.Update(crc32.Update(0, castagnoli, b[4:8]), castagnoli, payload)
	binary.LittleEndian.PutUint32(b[8:], sum)
	return append(b, payload...)
}

// Header is a header frame of format version 1 for host with nhooks hooks.
func Header(host string, nhooks int) []byte {
	p := binary.LittleEndian.AppendUint16(nil, 1)
	p = binary.LittleEndian.AppendUint16(p, 1)
	p = binary.LittleEndian.AppendUint64(p, 0x5eed)
	p = binary.AppendUvarint(p, 0)
	p = binary.AppendVarint(p, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	for _, s := range []string{host, "6.12.0-craft", "", "craft"} {
		if s == "" { // boot offset sits between kernel and version
			p = binary.AppendVarint(p, 0)
			continue
		}
		p = appendStr(p, s)
	}
	p = binary.AppendUvarint(p, uint64(nhooks))
	for i := 0; i < nhooks; i++ {
		for j := 0; j < 5; j++ {
			p = appendStr(p, "h")
		}
	}
	return Frame('H', p)
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Record is one record: type, uvarint body length, body.
func Record(typ byte, body []byte) []byte {
	return append(binary.AppendUvarint([]byte{typ}, uint64(len(body))), body...)
}

// A File is a crafted recording.
type File struct {
	Name string
	Data []byte
}

// Files are the hostile recordings of about size bytes each.
func Files(size int) []File {
	return []File{
		{"stats-per-cpu", StatsPerCPU(size)},
		{"fake-frames", FakeFrames(size)},
		{"zstd-bomb", ZstdBomb(size)},
		{"create-flood", CreateFlood(size)},
		{"long-strings", LongStrings(size)},
		{"header-hooks", HeaderHooks(size)},
		{"reorder-backwards", ReorderBackwards(size)},
		{"same-event", SameEvent(size)},
		{"same-event-x50", SameEventNearBound(size)},
		{"migration-flood", MigrationFlood(size)},
	}
}

// StatsPerCPU is stats records claiming a per-CPU lost counter for each
// byte they hold: the first of nearly 1 MiB (the largest record a writer
// makes, a million counters), the others as large as a frame (16 million).
func StatsPerCPU(size int) []byte {
	out := Header("craft", 0)
	for first := true; len(out) < size; first = false {
		n := min(size-len(out), MaxPayload) - 32
		if first {
			n = min(n, 1<<20-32)
		}
		if n < 8 {
			break
		}
		body := []byte{0, 1, 0, 0} // events, lost, decode errors, unjoined
		body = binary.AppendUvarint(body, uint64(n))
		body = append(body, bytes.Repeat([]byte{1}, n)...)
		out = append(out, Frame('R', Record(2, body))...)
	}
	return out
}

// FakeFrames is a header followed by frame headers one after another, each
// claiming a payload that reaches exactly to the end of the file, with a
// wrong checksum: a reader resynchronising checksums each claim.
func FakeFrames(size int) []byte {
	out := Header("craft", 0)
	n := (size - len(out)) / 12
	end := len(out) + 12*n
	for i := 0; i < n; i++ {
		claim := min(end-len(out)-12, MaxPayload)
		out = append(out, 0xa9, 'A', 'P', 'W', 'R', byte(claim), byte(claim>>8), byte(claim>>16), 0xde, 0xad, 0xbe, 0xef)
	}
	return out
}

// ZstdBomb is zstd frames that each expand to 5 MiB of empty records of
// an unknown type: thousands of times their size.
func ZstdBomb(size int) []byte {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	block := enc.EncodeAll(make([]byte, 5<<20), nil)
	fr := Frame('Z', block)
	out := Header("craft", 0)
	for len(out)+len(fr) <= size {
		out = append(out, fr...)
	}
	return out
}

// CreateFlood is a compressed stream of creates of one QPN: every create
// starts a new QP history.
func CreateFlood(size int) []byte {
	return repeated(size, 4<<20, func(i uint64) *event.Event {
		return &event.Event{Seq: i, Kind: event.KindQPCreate, Boot: 1e9 + i, Device: "rxe0", QPN: 17,
			Life: &event.QPLife{QPType: event.QPTypeRC, Origin: event.OriginUser}}
	})
}

// LongStrings is a compressed stream of QP events on distinct QPs whose
// hook name is 512 KiB long: each a timeline entry naming the hook.
func LongStrings(size int) []byte {
	hook := string(bytes.Repeat([]byte{'A'}, 512<<10))
	var recs []byte
	for i := uint64(1); len(recs) < 4<<20; i++ {
		recs = append(recs, QPEventRecord(i, uint32(i%1000+1), hook)...)
	}
	return zstdFrames(Header("craft", 0), recs, size)
}

// QPEventRecord is an event record of a COMM_EST QP event on rxe0/qpn,
// raised through the hook named hook (docs/recording.md, "Event record").
func QPEventRecord(seq uint64, qpn uint32, hook string) []byte {
	b := binary.AppendUvarint(nil, 1<<1|1<<7) // a QP payload; Time is the zero time
	b = append(b, byte(event.KindQPEvent))
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, 1e9+seq)
	b = append(b, 0, 1, 1) // cpu, pid, tid
	b = appendStr(b, "x")
	b = appendStr(b, "rxe0")
	b = binary.AppendUvarint(b, uint64(qpn))
	qp := []byte{byte(event.EvCommEst), byte(event.QPTypeRC), byte(event.OriginUser)}
	qp = appendStr(qp, hook)
	b = append(binary.AppendUvarint(b, uint64(len(qp))), qp...)
	return Record(1, b)
}

// SameEvent is one modify event (a failed alternate-path load, a finding
// each time) repeated in compressed blocks: as many records per byte as
// zstd allows.
func SameEvent(size int) []byte {
	return repeated(size, 4<<20, func(uint64) *event.Event {
		return &event.Event{Seq: 1, Kind: event.KindModify, Boot: 1e9, Device: "rxe0", QPN: 17, Comm: "x",
			Modify: &event.Modify{QPType: event.QPTypeRC, AttrMask: event.AttrAltPath, Ret: -22,
				Alt: &event.Path{Port: 1, DLID: 2}}}
	})
}

// MigrationFlood is a compressed stream of PATH_MIG events on 200 QPs:
// every QP has APM activity, so every timeline is shown, in full.
func MigrationFlood(size int) []byte {
	return repeated(size, 4<<20, func(i uint64) *event.Event {
		return &event.Event{Seq: i, Kind: event.KindQPEvent, Boot: 1e9 + i*1e6, Device: "rxe0", QPN: uint32(i%200 + 1),
			Comm: "x", QP: &event.QPEvent{Type: event.EvPathMig, QPType: event.QPTypeRC, Origin: event.OriginUser, Hook: "h"}}
	})
}

// ReorderBackwards is a compressed stream of QP events whose Boot stamps
// run backwards in runs of 1024 within one reorder window, each run above
// the last: a reorder stage that inserts by walking back from its newest
// event walks over every event of the run.
func ReorderBackwards(size int) []byte {
	var b bytes.Buffer
	w, err := recording.NewWriter(&b, event.Meta{Host: "craft", Kernel: "6.12.0-craft"},
		recording.Options{Compress: true, BlockSize: 256 << 10, FlushInterval: -1})
	if err != nil {
		panic(err)
	}
	for i := uint64(0); b.Len() < size-(256<<10); i++ { // a block compresses to less than 256 KiB
		run, k := i/1024, i%1024
		w.Write(&event.Event{Seq: i, Kind: event.KindQPEvent, Boot: 1e9 + run*1025 + 1023 - k, Device: "rxe0",
			QPN: uint32(k + 1), QP: &event.QPEvent{Type: event.EvCommEst, QPType: event.QPTypeRC}})
	}
	w.Close()
	return b.Bytes()
}

// HeaderHooks is a header claiming as many hooks as its frame holds.
func HeaderHooks(size int) []byte {
	return Header("craft", (min(size, MaxPayload)-64)/10)
}

// repeated is a header, then one zstd frame of block bytes of records of
// the events ev makes, repeated until the file reaches size.
func repeated(size, block int, ev func(i uint64) *event.Event) []byte {
	var b bytes.Buffer
	w, err := recording.NewWriter(&b, event.Meta{Host: "craft", Kernel: "6.12.0-craft"}, recording.Options{FlushInterval: -1})
	if err != nil {
		panic(err)
	}
	for i := uint64(1); b.Len() < block; i++ {
		if err := w.Write(ev(i)); err != nil {
			panic(err)
		}
		w.Flush()
	}
	// Take the records out of their frames, up to block bytes.
	data := b.Bytes()
	hdr := append([]byte(nil), data[:12+int(data[5])|int(data[6])<<8|int(data[7])<<16]...)
	var recs []byte
	for p := data[len(hdr):]; len(p) >= 12; {
		n := int(p[5]) | int(p[6])<<8 | int(p[7])<<16
		if len(recs)+n > block {
			break
		}
		recs = append(recs, p[12:12+n]...)
		p = p[12+n:]
	}
	return zstdFrames(hdr, recs, size)
}

// SameEventNearBound is SameEvent with each block padded by an unknown
// record of random bytes, so that blocks expand 50 times: just under the
// reader's bound, which then lets the most records through.
func SameEventNearBound(size int) []byte {
	data := SameEvent(1 << 20)
	hdr := data[:12+int(data[5])|int(data[6])<<8|int(data[7])<<16]
	rec := Record(1, eventBody(data))
	var recs []byte
	for len(recs) < 4<<20 {
		recs = append(recs, rec...)
	}
	pad := make([]byte, (4<<20)/50)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range pad {
		pad[i] = byte(rnd.Uint32())
	}
	recs = append(recs, Record(0x7f, pad)...)
	return zstdFrames(append([]byte(nil), hdr...), recs, size)
}

// eventBody is the body of the first event record in the first zstd frame
// of a file made by repeated.
func eventBody(data []byte) []byte {
	n := int(data[5]) | int(data[6])<<8 | int(data[7])<<16
	fr := data[12+n:]
	dec, _ := zstd.NewReader(nil)
	recs, err := dec.DecodeAll(fr[12:12+(int(fr[5])|int(fr[6])<<8|int(fr[7])<<16)], nil)
	if err != nil {
		panic(err)
	}
	l, k := binary.Uvarint(recs[1:])
	return recs[1+k : 1+k+int(l)]
}

// zstdFrames appends the records recs as one zstd frame to out, over and
// over until out reaches size.
func zstdFrames(out, recs []byte, size int) []byte {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	fr := Frame('Z', enc.EncodeAll(recs, nil))
	for len(out)+len(fr) <= size {
		out = append(out, fr...)
	}
	return out
}

// FixChecksums rewrites the checksum of every whole frame it finds, so a
// fuzzer's mutations reach the record decoders.
func FixChecksums(data []byte) {
	for pos := 0; pos+12 <= len(data); {
		h := data[pos:]
		n := int(h[5]) | int(h[6])<<8 | int(h[7])<<16
		if h[0] != 0xa9 || h[1] != 'A' || h[2] != 'P' || h[3] != 'W' || pos+12+n > len(data) {
			pos++
			continue
		}
		sum := crc32.Update(crc32.Update(0, castagnoli, h[4:8]), castagnoli, h[12:12+n])
		binary.LittleEndian.PutUint32(h[8:12], sum)
		pos += 12 + n
	}
}
