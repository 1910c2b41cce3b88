package collector

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	"github.com/apmwatch/apmwatch/internal/testkit"
)

// randomRecord fills every byte of a record at random, then gives it a
// kind (known or not) and names that are hostile more often than not:
// full arrays without a NUL, control bytes, invalid UTF-8.
func randomRecord(rng *rand.Rand) []byte {
	var r apmApmRecord
	b := unsafe.Slice((*byte)(unsafe.Pointer(&r)), recordSize)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	r.Kind = uint8(rng.IntN(10))
	names := []string{"", "rxe0", "mlx5_0", "\x1b[2J\r\n", "\xff\xfe", "kworker/u16:1"}
	if rng.IntN(3) > 0 {
		r.Comm, r.Dev = [16]int8{}, [64]int8{}
		setStr(r.Comm[:], names[rng.IntN(len(names))])
		setStr(r.Dev[:], names[rng.IntN(len(names))])
	}
	if rng.IntN(2) == 0 {
		r.FuncIp = 0xffffffffc0a01000 + uint64(rng.IntN(3))*4
	}
	return raw(&r)
}

// TestDecodeMatchesReference: the decoder gives the same events as the
// reference decoder (one allocation per field, no name cache) for the
// storm corpus and for random records of every kind.
func TestDecodeMatchesReference(t *testing.T) {
	dec, ref := stormDecoder(), stormDecoder()
	var inputs [][]byte
	for _, it := range newStormCorpus(64, dec).items {
		if it.raw != nil {
			inputs = append(inputs, it.raw)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		inputs = append(inputs, randomRecord(rng))
	}
	inputs = append(inputs, make([]byte, recordSize-1))
	for i, in := range inputs {
		got, gerr := dec.decode(in)
		want, werr := ref.decodeRef(in)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Fatalf("input %d: error %v, reference %v", i, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("input %d: decoded\n%+v\nreference\n%+v", i, got, want)
		}
	}
}

// BenchmarkDecodeStorm: the storm's ring records through the reference
// decoder (before) and the decoder (after), side by side in one run.
func BenchmarkDecodeStorm(b *testing.B) {
	dec := stormDecoder()
	var recs [][]byte
	for _, it := range newStormCorpus(stormQPs, dec).items {
		if it.raw != nil {
			recs = append(recs, it.raw)
		}
	}
	for _, v := range []struct {
		name string
		fn   func([]byte) error
	}{
		{"before", func(r []byte) error { _, err := dec.decodeRef(r); return err }},
		{"after", func(r []byte) error { _, err := dec.decode(r); return err }},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := testkit.CPUTime()
			for i := 0; b.Loop(); i++ {
				if err := v.fn(recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
			}
			testkit.ReportCPU(b, cpu)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
