package fleet

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// More than a thousand subjects of several records each: the reading
// gives each subject once, its last record, whatever the batches.
func TestReadLastGivesExactlyTheLastRecordOfEachSubject(t *testing.T) {
	for name, url := range fleettest.NATSServers(t) {
		t.Run(name, func(t *testing.T) {
			js := fleettest.JS(t, url)
			const n, rounds = 1200, 3
			fleettest.Fillers(t, js, n, rounds)
			got := map[string]int{}
			k, err := natsconn.ReadLastOf(context.Background(), js, []string{wire.ConnPrefix + ">"}, 10*n, func(r natsconn.LastRecord) {
				var c wire.Conn
				if err := json.Unmarshal(r.Data, &c); err != nil {
					t.Fatal(err)
				}
				if c.Rev != rounds || r.Stored.IsZero() || r.Seq%rounds != 0 {
					t.Fatalf("not the last record of %s: rev %d, seq %d", r.Subject, c.Rev, r.Seq)
				}
				got[r.Subject]++
			})
			if err != nil || k != n || len(got) != n {
				t.Fatalf("%d records of %d subjects (%v), want %d", k, len(got), err, n)
			}
			// past its bound the reading fails rather than give a part
			if _, err := natsconn.ReadLastOf(context.Background(), js, []string{wire.ConnPrefix + ">"}, n-1, func(natsconn.LastRecord) {}); err == nil {
				t.Fatal("a reading past its bound did not fail")
			}
		})
	}
}

// fleet status is the last record of every end: an end whose host
// restarted with its clock an hour behind is shown as its last record
// says, however many records the stream holds before it.
func TestStatusReadsTheLastRecordOfEachEndPastAThousand(t *testing.T) {
	for name, url := range fleettest.NATSServers(t) {
		t.Run(name, func(t *testing.T) {
			js := fleettest.JS(t, url)
			fleettest.Fillers(t, js, 1200, 3)
			m := fleettest.Base.Add(time.Minute)
			a, b := fleettest.Dated(fleettest.Conn("hostA", 1, 17, 2, 18)), fleettest.Dated(fleettest.Conn("hostB", 2, 18, 1, 17))
			a.Run, b.Run = "hostA-1", "hostB-1"
			a = fleettest.Rearmed(fleettest.Migrated(a, m), m.Add(time.Millisecond))
			// hostB restarted; its clock came back an hour behind: its
			// new run's record (migrated, not rearmed) is its last
			b2 := fleettest.Migrated(b, m.Add(-time.Hour))
			b2.Run, b2.Rev = "hostB-2", 1
			fleettest.Store(t, js, a, b, b2)
			st, err := ReadStatus(context.Background(), natsconn.NATSOptions{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			if st.Ends != 1202 || len(st.Rows) != 1 || st.Rows[0].State != "one-sided" || st.Rows[0].ArmedB {
				t.Fatalf("status: %d ends, rows %+v, want 1202 ends and the pair one-sided", st.Ends, st.Rows)
			}
		})
	}
}
