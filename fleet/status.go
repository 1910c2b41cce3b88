package fleet

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/olekukonko/tablewriter"
)

// StatusRow is one connection that cannot fail over now.
type StatusRow struct {
	State  string  `json:"state"`
	A      PeerEnd `json:"a"`
	B      PeerEnd `json:"b"`
	ArmedA bool    `json:"armed_a"`
	ArmedB bool    `json:"armed_b"`
	// SilentA and SilentB say the end's host is silent: what its record
	// says is not known to hold, and the row's state is unknown.
	SilentA  bool      `json:"silent_a,omitempty"`
	SilentB  bool      `json:"silent_b,omitempty"`
	Since    time.Time `json:"since"` // the later end's last change
	Evidence []string  `json:"evidence"`
}

// Status is the fabric's state now, from the last record of every end.
type Status struct {
	At       time.Time      `json:"at"`
	Ends     int            `json:"ends"`
	Unpaired int            `json:"unpaired_ends"`
	ByState  map[string]int `json:"connections"`
	Rows     []StatusRow    `json:"unprotected"`
	// Unconfirmed are ends whose candidate peer the identity rule refused
	// (the first 100; UnconfirmedEnds counts them all).
	Unconfirmed     []Unconfirmed     `json:"unconfirmed,omitempty"`
	UnconfirmedEnds int               `json:"unconfirmed_ends"`
	Errors          map[string]string `json:"errors,omitempty"`
	// Refused counts the records refused (records_refused_total's
	// reasons); Claims lists the refused claims on another host's end
	// (the first 100).
	Refused map[string]uint64 `json:"refused,omitempty"`
	Claims  []Claim           `json:"claims,omitempty"`
	// Hosts are the hosts heard to heartbeat: when last, their clock's
	// offset from the stream's, silent or not (silent.go).
	Hosts []HostClock `json:"hosts"`
}

// Bounds of a status: the subjects it reads at most (a replica of the
// records' stream holds some 20 M at the scale docs/fleet.md sizes), and
// how long it reads them unless the caller's context says.
const (
	maxStatusRecords = 1 << 25
	statusTimeout    = 10 * time.Minute
)

// ReadStatus rebuilds every partition from the stream (the last record of
// each end) and lists the connections that cannot fail over: one-sided,
// unprotected, half-armed.
func ReadStatus(ctx context.Context, o natsconn.NATSOptions) (*Status, error) {
	return ReadStatusSilentAfter(ctx, o, DefaultSilentAfter)
}

// ReadStatusSilentAfter is ReadStatus with a host silent when its latest
// heartbeat is older than silentAfter (by this machine's clock): its ends'
// connections are unknown.
func ReadStatusSilentAfter(ctx context.Context, o natsconn.NATSOptions, silentAfter time.Duration) (*Status, error) {
	o.Name = "apmwatch fleet status"
	nc, err := o.Connect(false)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	g := NewEngine(EngineConfig{Deadline: time.Nanosecond, SilentAfter: silentAfter}, func(Line) {})
	now := time.Now()
	var filters []string
	for p := range wire.Partitions {
		filters = append(filters, wire.ConnFilter(p))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, statusTimeout)
		defer cancel()
	}
	if _, err := natsconn.StreamsOf(ctx, js, []string{wire.HeartbeatFilter}); err == nil {
		filters = append(filters, wire.HeartbeatFilter)
	}
	_, err = natsconn.ReadLastOf(ctx, js, filters, maxStatusRecords, func(r natsconn.LastRecord) {
		rec := Received{Subject: r.Subject, Stored: r.Stored, Data: r.Data}
		if wire.IsHeartbeat(r.Subject) {
			g.TakeHeartbeat(rec, now)
			return
		}
		g.Take(rec, now)
	})
	if err != nil {
		return nil, fmt.Errorf("fleet status: %w", err)
	}
	g.Advance(now)
	return g.status(now), nil
}

func (g *Engine) status(now time.Time) *Status {
	st := g.Stats()
	s := &Status{At: now.UTC(), Ends: st.Ends, Unpaired: st.Unpaired, ByState: map[string]int{}, Rows: []StatusRow{}}
	for k, v := range st.ByState {
		s.ByState[k.String()] = v
	}
	s.Unconfirmed, s.UnconfirmedEnds = g.unconfirmedRows()
	s.Claims = g.Claims()
	for k, v := range g.RefusedBy() {
		if v > 0 {
			if s.Refused == nil {
				s.Refused = map[string]uint64{}
			}
			s.Refused[k] = v
		}
	}
	s.Hosts = g.HostClocks()
	g.eachEnd(func(e *end) {
		b := g.peerOf(e)
		if b == nil || wire.Less(b.key, e.key) {
			return
		}
		a := e
		silentA, silentB := g.silentEnd(a), g.silentEnd(b)
		state := e.state.String()
		if silentA || silentB {
			s.ByState[state]--
			s.ByState[stateUnknown]++
			state = stateUnknown
		} else if !e.state.Bad() {
			return
		}
		s.Rows = append(s.Rows, StatusRow{State: state,
			A:      PeerEnd{Host: g.names.name(a.host), Device: g.names.name(a.dev), QPN: a.key.QPN()},
			B:      PeerEnd{Host: g.names.name(b.host), Device: g.names.name(b.dev), QPN: b.key.QPN()},
			ArmedA: a.armed && !silentA, ArmedB: b.armed && !silentB, SilentA: silentA, SilentB: silentB,
			Since: time.Unix(0, max(a.since, b.since)).UTC(), Evidence: []string{g.evidence(a).What, g.evidence(b).What}})
	})
	sort.Slice(s.Rows, func(i, j int) bool { return s.Rows[i].Since.Before(s.Rows[j].Since) })
	return s
}

// WriteStatusTable writes the status as a table and a summary line.
func WriteStatusTable(w io.Writer, s *Status) error {
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(0))
	t.Header([]string{"STATE", "HOST A", "DEVICE", "QPN", "ARMED", "HOST B", "DEVICE", "QPN", "ARMED", "SINCE"})
	for _, r := range s.Rows {
		if err := t.Append([]string{r.State, escape.Text(r.A.Host), escape.Text(r.A.Device), fmt.Sprint(r.A.QPN), armedCell(r.ArmedA, r.SilentA),
			escape.Text(r.B.Host), escape.Text(r.B.Device), fmt.Sprint(r.B.QPN), armedCell(r.ArmedB, r.SilentB), r.Since.Format(time.RFC3339)}); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d connections cannot fail over; %d paired (%d armed, %d one-sided, %d unprotected, %d half-armed, %d without APM), %d ends unpaired\n",
		badRows(s), paired(s), s.ByState["armed"], s.ByState["one-sided"], s.ByState["unprotected"], s.ByState["half-armed"], s.ByState["no-apm"], s.Unpaired)
	if err == nil && s.UnconfirmedEnds > 0 {
		_, err = fmt.Fprintf(w, "%d unpaired ends point at an end that does not point back (not judged as pairs; -o json says why)\n", s.UnconfirmedEnds)
	}
	if err == nil {
		err = writeRefused(w, s)
	}
	if err == nil {
		err = writeHosts(w, s)
	}
	return err
}

// writeRefused says how many records were refused, and why, when any
// were.
func writeRefused(w io.Writer, s *Status) error {
	n := uint64(0)
	var why []string
	for _, r := range refusalNames {
		if v := s.Refused[r]; v > 0 {
			n += v
			why = append(why, fmt.Sprintf("%d %s", v, r))
		}
	}
	if n == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "%d records refused (%s; -o json lists the claims on another host's end)\n", n, strings.Join(why, ", "))
	return err
}

func paired(s *Status) int {
	n := 0
	for _, v := range s.ByState {
		n += v
	}
	return n
}
