package recording

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// FuzzReader feeds arbitrary bytes to the reader. With fix set, the frame
// checksums are recomputed first, so mutations reach the record decoders
// instead of stopping at the checksum. The reader must not panic, must end,
// and every event it returns must survive another encode and decode.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			fixChecksums(data)
		}
		r, err := NewReader(bytes.NewReader(data), "fuzz", ReadOptions{})
		if err != nil {
			return
		}
		off := int64(r.Meta().BootOffset)
		for n := 0; ; n++ {
			e, err := r.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("next: %v", err)
			}
			if n > len(data) {
				t.Fatalf("%d events from %d bytes", n, len(data))
			}
			rec := appendEvent(nil, e, off)
			d := dec{b: rec[1:]}
			again, err := decodeEvent(d.bytes(d.uvarint()), off, nil)
			if err != nil || !reflect.DeepEqual(again, e) {
				t.Fatalf("event does not survive a re-encode: %v\n got %s\nwant %s", err, dump(again), dump(e))
			}
		}
		r.Stats()
		if len(r.Warnings()) > maxWarnings {
			t.Fatalf("%d warnings kept", len(r.Warnings()))
		}
		r.Close()
	})
}

// fixChecksums rewrites the checksum of every frame it can find.
func fixChecksums(data []byte) {
	for pos := 0; pos+frameHeaderLen <= len(data); {
		_, n, ok := parseFrameHeader(data[pos:])
		if !ok || pos+frameHeaderLen+n > len(data) {
			pos++
			continue
		}
		fr := data[pos : pos+frameHeaderLen+n]
		binary.LittleEndian.PutUint32(fr[8:12], frameSum(fr, fr[frameHeaderLen:]))
		pos += len(fr)
	}
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus in testdata/fuzz/FuzzReader")

// TestSeedCorpus writes the committed seed corpus (with -update-corpus):
// small recordings of each kind, clean, cut and damaged.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	if !*updateCorpus {
		if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) < 5 {
			t.Fatalf("seed corpus missing: go test ./recording -run TestSeedCorpus -update-corpus")
		}
		return
	}
	meta := testMeta()
	rng := rand.New(rand.NewPCG(5, 5))
	withStats := func(evs []*event.Event, opts Options) []byte {
		var buf bytes.Buffer
		opts.FlushInterval = -1
		w, _ := NewWriter(&buf, meta, opts)
		for i, e := range evs {
			w.Write(e)
			if i == len(evs)/2 {
				w.WriteStats(event.Stats{Events: 9, Lost: 2, LostPerCPU: []uint64{0, 2}, Unjoined: 1})
			}
		}
		w.Close()
		return buf.Bytes()
	}
	var random []*event.Event
	for i := 0; i < 8; i++ {
		random = append(random, randomEvent(rng, meta))
	}
	plain := withStats(realisticEvents(1, 12), Options{})
	flipped := bytes.Clone(plain)
	flipped[len(flipped)/2] ^= 0x10
	seeds := map[string]struct {
		data []byte
		fix  bool
	}{
		"plain":        {plain, false},
		"plain-fix":    {plain, true},
		"zstd":         {withStats(realisticEvents(2, 40), Options{Compress: true}), false},
		"zstd-fix":     {withStats(realisticEvents(3, 40), Options{Compress: true}), true},
		"random":       {withStats(random, Options{}), true},
		"cut":          {plain[:len(plain)-17], false},
		"flipped":      {flipped, false},
		"header-only":  {plain[:bytes.Index(plain[4:], frameMagic[:])+4], false},
		"tiny":         {withStats(realisticEvents(4, 2), Options{}), true},
		"not-a-record": {[]byte("apmwatch\n"), false},
	}
	os.MkdirAll(dir, 0o755)
	for name, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", s.data, s.fix)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
