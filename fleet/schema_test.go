package fleet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
)

// The fleet's lines (one-sided-rearm, its resolution, unprotected-connection)
// are lines of the one finding schema; so is every line the running fleet
// writes (syncBuffer.lines checks them in every test) and every line in
// the findings stream (TestFleetReportsOneSidedRearmNamingBothHosts).
func TestFleetLinesMatchSchema(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := conn("hostA", 1, 17, 2, 18), conn("hostB", 2, 18, 1, 17)
	c, d := conn("hostA", 1, 30, 2, 31), conn("hostB", 2, 31, 1, 30)
	for _, r := range []*Conn{&a, &b, &c, &d} {
		g.Apply(r, t0)
	}
	m := t0.Add(10 * time.Second)
	a, b, c, d = migrated(a, m), migrated(b, m), migrated(c, m), migrated(d, m)
	a = rearmed(a, m.Add(100*time.Millisecond))
	for _, r := range []*Conn{&a, &b, &c, &d} {
		g.Apply(r, m)
	}
	g.Advance(m.Add(3 * time.Second))
	b = rearmed(b, m.Add(20*time.Second))
	g.Apply(&b, b.At)
	kinds := map[string]bool{}
	for _, l := range got {
		raw, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := findinglinetest.Check(raw); err != nil {
			t.Errorf("%v\n%s", err, raw)
		}
		kinds[l.Type+" "+string(l.Kind)] = true
	}
	for _, k := range []string{"finding one-sided-rearm", "resolution one-sided-rearm", "finding unprotected-connection"} {
		if !kinds[k] {
			t.Errorf("no %s line among %v", k, kinds)
		}
	}
}
