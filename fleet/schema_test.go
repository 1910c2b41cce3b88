package fleet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// The fleet's lines (one-sided-rearm, its resolution, unprotected-connection)
// are lines of the one finding schema; so is every line the running fleet
// writes (syncBuffer.lines checks them in every test) and every line in
// the findings stream (TestFleetReportsOneSidedRearmNamingBothHosts).
func TestFleetLinesMatchSchema(t *testing.T) {
	var got []Line
	g := NewEngine(EngineConfig{Deadline: 2 * time.Second}, collect(&got))
	a, b := fleettest.Conn("hostA", 1, 17, 2, 18), fleettest.Conn("hostB", 2, 18, 1, 17)
	c, d := fleettest.Conn("hostA", 1, 30, 2, 31), fleettest.Conn("hostB", 2, 31, 1, 30)
	for _, r := range []*wire.Conn{&a, &b, &c, &d} {
		g.Apply(r, fleettest.T0)
	}
	m := fleettest.T0.Add(10 * time.Second)
	a, b, c, d = fleettest.Migrated(a, m), fleettest.Migrated(b, m), fleettest.Migrated(c, m), fleettest.Migrated(d, m)
	a = fleettest.Rearmed(a, m.Add(100*time.Millisecond))
	for _, r := range []*wire.Conn{&a, &b, &c, &d} {
		g.Apply(r, m)
	}
	g.Advance(m.Add(3 * time.Second))
	b = fleettest.Rearmed(b, m.Add(20*time.Second))
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
