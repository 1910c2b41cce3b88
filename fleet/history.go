package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HistoryOptions choose a time range of the fleet streams.
type HistoryOptions struct {
	NATS         natsconn.NATSOptions
	Since, Until time.Time // stream times (when NATS stored the messages)
	Deadline     time.Duration
}

// History is a postmortem of a time range of the fleet streams: the
// finding lines the hosts and the fleet published in it, and the
// connection records replayed through the pairing engine (the findings it
// gives, and each connection's records from both ends).
type History struct {
	NATS        string            `json:"nats"`
	Since       time.Time         `json:"since"`
	Until       time.Time         `json:"until"`
	Records     int               `json:"records"`
	Lines       []json.RawMessage `json:"lines"`  // as published, hosts' and fleet's
	Judged      []Line            `json:"judged"` // the replay's findings
	Connections []HistConn        `json:"connections"`
	Truncated   bool              `json:"truncated,omitempty"` // bounds reached: not everything is listed
	// Refused counts the records the replay refused, by reason (as the
	// fleet refuses them); they are not listed.
	Refused   map[string]int `json:"refused,omitempty"`
	lineBytes int            // of Lines
}

// HistConn is one connection's records in the range.
type HistConn struct {
	Connection string      `json:"connection"`
	State      string      `json:"state"` // at the end of the range
	Records    []HistEntry `json:"records"`
}

// HistEntry is one record of one end.
type HistEntry struct {
	At      time.Time `json:"at"`
	Host    string    `json:"host"`
	Device  string    `json:"device"`
	QPN     uint32    `json:"qpn"`
	Armed   bool      `json:"armed"`
	Mig     string    `json:"mig_state,omitempty"`
	Episode uint32    `json:"episode"`
	Gone    bool      `json:"gone,omitempty"`
}

// Bounds of a history (the stream may hold millions of records).
const (
	maxHistLines     = 100000
	maxHistLineBytes = 64 << 20 // of the lines kept, all together
	maxHistConns     = 10000
	maxHistPerConn   = 200
	// maxLineDepth bounds the nesting of a line kept (a finding line's is
	// 3): the JSON report indents each level, so a deep line would grow
	// quadratically there.
	maxLineDepth = 8
)

// ReadHistory reads the range.
func ReadHistory(ctx context.Context, o HistoryOptions) (*History, error) {
	if o.Until.IsZero() {
		o.Until = time.Now()
	}
	if !o.Since.Before(o.Until) {
		return nil, fmt.Errorf("--since %s is not before --until %s", o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
	}
	if o.Deadline <= 0 {
		o.Deadline = 2 * time.Second
	}
	o.NATS.Name = "apmwatch postmortem"
	nc, err := o.NATS.Connect(false)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	h := &History{NATS: o.NATS.URL, Since: o.Since.UTC(), Until: o.Until.UTC(), Lines: []json.RawMessage{}, Judged: []Line{}}
	err = readRange(ctx, js, wire.FindingsStream, nil, o.Since, o.Until, func(m jetstream.Msg, _ time.Time) { h.addLine(m.Data()) })
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", wire.FindingsStream, err)
	}
	var filters []string
	for p := range wire.Partitions {
		filters = append(filters, wire.ConnFilter(p))
	}
	streams, err := natsconn.StreamsOf(ctx, js, filters)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, err
	}
	byConn := map[string]*HistConn{}
	// each stream holds whole partitions, so both ends of a connection:
	// one replay each, in the stream's order
	for name, fs := range streams {
		if err := h.replay(ctx, js, name, fs, o, byConn); err != nil {
			return nil, err
		}
	}
	h.finish(byConn)
	return h, nil
}

func (h *History) replay(ctx context.Context, js jetstream.JetStream, stream string, filters []string, o HistoryOptions, byConn map[string]*HistConn) error {
	g := NewEngine(EngineConfig{Deadline: o.Deadline}, func(l Line) { h.Judged = append(h.Judged, l) })
	err := readRange(ctx, js, stream, filters, o.Since, o.Until, func(m jetstream.Msg, ts time.Time) { h.addRecord(g, byConn, m.Subject(), m.Data(), ts) })
	if err != nil {
		return fmt.Errorf("reading %s: %w", stream, err)
	}
	endReplay(g, o.Until, byConn)
	return nil
}

// addLine takes one finding line as published. Lines that are not JSON,
// or nested deeper than a finding line can be, are skipped; the others
// are kept as published, their strings' terminal controls and invalid
// UTF-8 written as JSON escapes (jsonText).
func (h *History) addLine(b []byte) {
	if len(h.Lines) >= maxHistLines || h.lineBytes+len(b) > maxHistLineBytes {
		h.Truncated = true
		return
	}
	if json.Valid(b) && jsonDepth(b) <= maxLineDepth {
		h.Lines = append(h.Lines, json.RawMessage(jsonText(b)))
		h.lineBytes += len(b)
	}
}

// jsonDepth returns the nesting depth of valid JSON b.
func jsonDepth(b []byte) int {
	depth, most, str := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case str && c == '\\':
			i++
		case c == '"':
			str = !str
		case str:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most
}

// jsonText returns valid JSON b with every character escape.Text would
// escape (DEL, C1 controls, line separators, bidirectional and zero-width
// characters) written as a JSON \u escape, and every byte that is not
// UTF-8 as \ufffd (what a JSON decoder reads it as): the same value, and
// nothing in it a terminal would act on. (Valid JSON has no raw C0
// control inside a string, and no byte above ASCII outside one.) Clean
// text is returned as is.
func jsonText(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] >= 0x20 && b[i] < 0x7f {
		i++
	}
	if i == len(b) {
		return b
	}
	out := append(make([]byte, 0, len(b)+16), b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			out = append(out, `\ufffd`...)
		case r < 0x80 && r != 0x7f || escape.Text(string(r)) == string(r):
			out = append(out, b[i:i+n]...)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	return out
}

// addRecord replays one connection record, stored on subject at ts,
// through the pairing engine g and lists it under its connection; a
// record the engine refuses (Take) is counted, not listed.
func (h *History) addRecord(g *Engine, byConn map[string]*HistConn, subject string, b []byte, ts time.Time) {
	g.Advance(ts)
	c, why := g.Take(Received{Subject: subject, Stored: ts, Data: b}, ts)
	switch why {
	case "":
	case refusedTooLarge.String(), refusedBadSubject.String(), refusedUndecodable.String():
		return
	default:
		h.Records++
		if h.Refused == nil {
			h.Refused = map[string]int{}
		}
		h.Refused[why]++
		return
	}
	h.Records++
	l, r := c.Keys()
	a, bk := l, r
	if wire.Less(bk, a) {
		a, bk = bk, a
	}
	name := a.String() + " <-> " + bk.String()
	hc := byConn[name]
	if hc == nil {
		if len(byConn) >= maxHistConns {
			h.Truncated = true
			return
		}
		hc = &HistConn{Connection: name}
		byConn[name] = hc
	}
	if len(hc.Records) >= maxHistPerConn {
		h.Truncated = true
		return
	}
	hc.Records = append(hc.Records, HistEntry{At: c.At, Host: clip(c.Host), Device: clip(c.Device), QPN: c.Local.QPN, Armed: c.Armed,
		Mig: clip(c.Mig), Episode: c.Episode.N, Gone: c.Gone})
}

// clip bounds a name from a record kept in a history, as the engine
// bounds the names it keeps.
func clip(s string) string { return s[:min(len(s), maxNameLen)] }

// endReplay judges what is due by until and notes each connection's
// state then.
func endReplay(g *Engine, until time.Time, byConn map[string]*HistConn) {
	g.Advance(until)
	g.eachEnd(func(e *end) {
		p := g.peerOf(e)
		if p == nil || wire.Less(p.key, e.key) {
			return
		}
		if hc := byConn[connName(e, p)]; hc != nil {
			hc.State = e.state.String()
		}
	})
}

// finish lists the connections, in order.
func (h *History) finish(byConn map[string]*HistConn) {
	for _, hc := range byConn {
		if hc.State == "" {
			hc.State = StateUnpaired.String()
		}
		h.Connections = append(h.Connections, *hc)
	}
	sort.Slice(h.Connections, func(i, j int) bool { return h.Connections[i].Connection < h.Connections[j].Connection })
}

// readRange delivers a stream's messages stored in [since, until], with
// an ephemeral consumer of its own (deleted after; the server drops it a
// minute after its last use if that fails). Not an ordered consumer:
// on a cluster its first fetch recreates it and may ask before the new
// one is served.
func readRange(ctx context.Context, js jetstream.JetStream, stream string, filters []string, since, until time.Time, fn func(jetstream.Msg, time.Time)) error {
	cfg := jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since,
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute, MemoryStorage: true, Replicas: 1, FilterSubjects: filters}
	if len(filters) == 1 {
		cfg.FilterSubject, cfg.FilterSubjects = filters[0], nil
	}
	c, err := js.CreateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		js.DeleteConsumer(dctx, stream, c.CachedInfo().Name)
	}()
	if c.CachedInfo().NumPending == 0 {
		return nil
	}
	for {
		batch, err := natsconn.FetchAnswered(ctx, c, 1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if md.Timestamp.After(until) {
				return nil
			}
			fn(m, md.Timestamp)
			if md.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if got == 0 {
			return nil
		}
	}
}

// WriteHistoryText writes the history for a terminal.
func WriteHistoryText(w io.Writer, h *History) error {
	fmt.Fprintf(w, "fleet streams at %s, %s to %s: %d connection records, %d finding lines\n", escape.Text(h.NATS),
		h.Since.Format(time.RFC3339), h.Until.Format(time.RFC3339), h.Records, len(h.Lines))
	if h.Truncated {
		fmt.Fprintln(w, "(bounds reached: not everything is listed; narrow --since/--until)")
	}
	for _, r := range refusalNames {
		if n := h.Refused[r]; n > 0 {
			fmt.Fprintf(w, "%d records refused: %s (not listed)\n", n, r)
		}
	}
	fmt.Fprintf(w, "\nfinding lines published (%d):\n", len(h.Lines))
	for _, raw := range h.Lines {
		var l struct {
			Type        string    `json:"type"`
			Host        string    `json:"host"`
			Kind        string    `json:"kind"`
			Logged      time.Time `json:"logged"`
			Explanation string    `json:"explanation"`
			QP          struct {
				Device string `json:"device"`
				QPN    uint32 `json:"qpn"`
			} `json:"qp"`
			Peer *PeerEnd `json:"peer"`
		}
		if json.Unmarshal(raw, &l) != nil {
			continue
		}
		peer := ""
		if l.Peer != nil {
			peer = fmt.Sprintf(" peer %s %s QP %d", escape.Text(l.Peer.Host), escape.Text(l.Peer.Device), l.Peer.QPN)
		}
		fmt.Fprintf(w, "  %s %s %s %s %s QP %d%s: %s\n", l.Logged.Format(time.RFC3339), escape.Text(l.Type), escape.Text(l.Kind),
			escape.Text(l.Host), escape.Text(l.QP.Device), l.QP.QPN, peer, escape.Text(l.Explanation))
	}
	fmt.Fprintf(w, "\nthe records replayed judge (%d):\n", len(h.Judged))
	for _, l := range h.Judged {
		fmt.Fprintf(w, "  %s %s %s %s QP %d: %s\n", l.LastTime.Format(time.RFC3339), l.Kind, escape.Text(l.Host), escape.Text(l.QP.Device),
			l.QP.QPN, escape.Text(l.Explanation))
	}
	fmt.Fprintf(w, "\nconnections (%d):\n", len(h.Connections))
	for _, c := range h.Connections {
		fmt.Fprintf(w, "  %s: %s at the end\n", c.Connection, c.State)
		for _, r := range c.Records {
			what := fmt.Sprintf("armed=%v mig=%s episode=%d", r.Armed, r.Mig, r.Episode)
			if r.Gone {
				what = "gone"
			}
			fmt.Fprintf(w, "    %s %s %s QP %d %s\n", r.At.Format("15:04:05.000"), escape.Text(r.Host), escape.Text(r.Device), r.QPN, escape.Text(what))
		}
	}
	return nil
}

// WriteHistoryJSON writes the history as one JSON object.
func WriteHistoryJSON(w io.Writer, h *History) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(escape.Value(h))
}
