package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/testkit"
	"github.com/apmwatch/apmwatch/output"
	"github.com/apmwatch/apmwatch/recording"
)

// stormQPs is the storm's size: 2048 QPs behind one failing port on
// each of two devices.
const stormQPs = 4096

// pipeline is the reader's work per record, as `apmwatch trace --record`
// and audit do it on one goroutine: copy the sample out of the ring (what
// ringbuf.Reader.ReadInto does), decode it, write it to the recording,
// hand it to the model. model and w may be nil (that stage is left out).
type pipeline struct {
	dec    *decoder
	model  *apm.Model
	w      *recording.Writer
	out    *output.JSONWriter // trace --output json; nil: no output
	sample []byte
	seq    uint64
	found  map[apm.Kind]int
}

func newPipeline(dec *decoder, withModel bool, out io.Writer) (*pipeline, error) {
	p := &pipeline{dec: dec, found: map[apm.Kind]int{}}
	if withModel {
		m, err := apm.New(apm.DefaultConfig(), func(f apm.Finding) {
			if !f.Resolved {
				p.found[f.Kind]++
			}
		})
		if err != nil {
			return nil, err
		}
		p.model = m
	}
	if out != nil {
		w, err := recording.NewWriter(out, event.Meta{Host: "bench", BootOffset: dec.offset},
			recording.Options{FlushInterval: -1})
		if err != nil {
			return nil, err
		}
		p.w = w
	}
	return p, nil
}

// feed takes one input of the corpus, its Boot stamps moved on by off.
func (p *pipeline) feed(it *stormItem, off uint64) error {
	e, err := p.read(it, off)
	if err != nil {
		return err
	}
	return p.handle(e)
}

// read is the ring reader's part: the sample copied and decoded (or a
// reading made).
func (p *pipeline) read(it *stormItem, off uint64) (*event.Event, error) {
	var e *event.Event
	if it.raw != nil {
		p.sample = append(p.sample[:0], it.raw...)
		boot := binary.LittleEndian.Uint64(p.sample) + off // BootNs leads the record
		binary.LittleEndian.PutUint64(p.sample, boot)
		var err error
		if e, err = p.dec.decode(p.sample); err != nil {
			return nil, err
		}
		p.seq++
		e.Seq = p.seq
	} else {
		c := *it.truth
		c.Boot += off
		c.Time = time.Unix(0, int64(c.Boot)).Add(p.dec.offset)
		e = &c
	}
	return e, nil
}

// handle is the consumer's part: recorder, model and output.
func (p *pipeline) handle(e *event.Event) error {
	if p.w != nil {
		if err := p.w.Write(e); err != nil {
			return err
		}
	}
	if p.model != nil {
		p.model.Handle(e)
	}
	if p.out != nil {
		return p.out.Write(e)
	}
	return nil
}

func (p *pipeline) finish(end uint64) error {
	if p.model != nil {
		p.model.Finish(end)
	}
	if p.w != nil {
		return p.w.Close()
	}
	return nil
}

// TestStormCorpus runs three rounds of the storm through decode, recorder
// and model: every unrearmed QP is one missed-rearm per round and nothing
// else is found, and the recording reads back whole.
func TestStormCorpus(t *testing.T) {
	const qps, rounds = 512, 3
	dec := stormDecoder()
	c := newStormCorpus(qps, dec)
	var file bytes.Buffer
	p, err := newPipeline(dec, true, &file)
	if err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		for i := range c.items {
			if err := p.feed(&c.items[i], uint64(r)*uint64(stormRound)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.finish(uint64(rounds) * uint64(stormRound)); err != nil {
		t.Fatal(err)
	}
	want := map[apm.Kind]int{apm.MissedRearm: rounds * c.neverRearm}
	if len(p.found) != len(want) || p.found[apm.MissedRearm] != want[apm.MissedRearm] {
		t.Errorf("findings %v, want %v", p.found, want)
	}
	s := p.model.Stats()
	if s.QPs != 0 || s.Duplicates != uint64(rounds*qps) || s.Unattributed != 0 || s.Late != 0 {
		t.Errorf("model stats: %+v", s)
	}
	if s.Events != uint64(rounds*len(c.items)) {
		t.Errorf("%d events applied, want %d", s.Events, rounds*len(c.items))
	}
	rd, err := recording.NewReader(&file, "", recording.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := rd.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != rounds*len(c.items) {
		t.Errorf("recording holds %d events, want %d", n, rounds*len(c.items))
	}
}

type discard struct{ n int64 }

func (d *discard) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }

// BenchmarkStorm: events per second through the reader's stages on one
// goroutine, over the storm corpus repeated (each round 7 s of Boot time
// after the one before). decode: ring copy and decode only; model: and
// the APM model; record: and the recording writer (plain frames, as
// trace --record writes them).
func BenchmarkStorm(b *testing.B) {
	dec := stormDecoder()
	c := newStormCorpus(stormQPs, dec)
	for _, st := range []struct {
		name   string
		model  bool
		record bool
		json   bool // and --output json
		chans  bool // the reader in a goroutine of its own, as the collector runs it
	}{{"decode", false, false, false, false}, {"decode+model", true, false, false, false},
		{"decode+model+record", true, true, false, false}, {"decode+model+record+channel", true, true, false, true},
		{"decode+model+record+json", true, true, true, false}} {
		b.Run(st.name, func(b *testing.B) {
			var out *discard
			if st.record {
				out = &discard{}
			}
			var w io.Writer
			if out != nil {
				w = out
			}
			p, err := newPipeline(dec, st.model, w)
			if err != nil {
				b.Fatal(err)
			}
			if st.json {
				p.out = output.NewJSONWriter(io.Discard)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := testkit.CPUTime()
			var off uint64
			if st.chans {
				off = runWithReader(b, p, &c)
			} else {
				for i, j := 0, 0; i < b.N; i++ {
					if err := p.feed(&c.items[j], off); err != nil {
						b.Fatal(err)
					}
					if j++; j == len(c.items) {
						j, off = 0, off+uint64(stormRound)
					}
				}
			}
			if err := p.finish(off + uint64(stormRound)); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			testkit.ReportCPU(b, cpu)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			if out != nil {
				b.ReportMetric(float64(out.n)/float64(b.N), "file-B/event")
			}
		})
	}
}

// runWithReader runs b.N inputs with the reading and decoding in a
// goroutine of its own that hands events over a channel of 1024, as
// Collector.read does, and returns the last round's offset.
func runWithReader(b *testing.B, p *pipeline, c *stormCorpus) uint64 {
	ch := make(chan *event.Event, 1024)
	errc := make(chan error, 1)
	var off uint64
	go func() {
		defer close(ch)
		for i, j := 0, 0; i < b.N; i++ {
			e, err := p.read(&c.items[j], off)
			if err != nil {
				errc <- err
				return
			}
			ch <- e
			if j++; j == len(c.items) {
				j, off = 0, off+uint64(stormRound)
			}
		}
	}()
	for e := range ch {
		if err := p.handle(e); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	return off
}
