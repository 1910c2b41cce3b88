package fleet

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// A restarted instance learns from the findings stream which of its
// findings are still open (a finding line with no resolution line after
// it), so that it closes them as a running instance would: a pair found
// open adopts its finding (its resolution comes when both ends are armed,
// or when a later judgement replaces it), a connection whose ends are no
// longer paired once the rebuild is read gets its resolution then, and a
// host-silent finding of a host heard again gets its resolution at its
// heartbeat (of a host the stream no longer holds, once the rebuild is
// read).

// openLine is what an instance keeps of an open finding of the stream.
type openLine struct {
	ID         uint64   `json:"id"`
	Type       string   `json:"type"`
	Resolves   uint64   `json:"resolves"`
	Finding    apm.Kind `json:"finding"`
	Kind       apm.Kind `json:"kind"` // lines before schema 1 name the kind only here
	Host       string   `json:"host"`
	Hosts      []string `json:"hosts"`
	Connection string   `json:"connection"`
	Partition  int      `json:"partition"`
}

// maxOpenKept bounds the open findings an instance takes from the stream.
const maxOpenKept = 1 << 20

// Seen takes one line of the findings stream, in the stream's order: its
// ID is not given again, and a finding not (yet) resolved is open.
func (g *Engine) Seen(data []byte) {
	var l openLine
	if len(data) > wire.MaxRecordBytes || json.Unmarshal(data, &l) != nil || l.ID == 0 {
		return
	}
	if l.Finding != "" {
		l.Kind = l.Finding
	}
	g.judged[l.ID] = true
	if g.opened == nil {
		g.opened, g.openByConn, g.openByHost = map[uint64]openLine{}, map[string][]uint64{}, map[string]uint64{}
	}
	switch {
	case l.Type == findingline.TypeResolution:
		delete(g.opened, l.Resolves) // the indexes keep its ID: looked up, it is not found
	case l.Type != findingline.TypeFinding || len(g.opened) >= maxOpenKept:
	case l.Connection != "":
		g.opened[l.ID] = l
		g.openByConn[l.Connection] = append(g.openByConn[l.Connection], l.ID)
	case l.Kind == apm.HostSilent && len(l.Hosts) == 1:
		g.opened[l.ID] = l
		g.openByHost[l.Hosts[0]] = l.ID
	}
}

// adopt gives a pair the open finding of the stream on its connection.
func (g *Engine) adopt(e *end) {
	a, b := g.order(e)
	conn := connName(a, b)
	ids := g.openByConn[conn]
	delete(g.openByConn, conn)
	for _, id := range ids {
		l, ok := g.opened[id]
		if !ok {
			continue
		}
		delete(g.opened, id)
		if e.open != 0 { // more than one open: the one kept stands for the pair
			g.closeStored(id, l, "a later finding of its connection replaces it")
			continue
		}
		s := StateOneSided
		if l.Kind == apm.UnprotectedConnection {
			s = StateUnprotected
		}
		a.open, b.open = openOf(id, s), openOf(id, s)
	}
}

// CloseUnpaired resolves the stream's open findings on connections that
// are not paired now (their ends gone while no instance ran), and those
// on hosts whose heartbeats the stream no longer holds (purged): once the
// rebuild is read.
func (g *Engine) CloseUnpaired() {
	for _, ids := range g.openByConn {
		for _, id := range ids {
			if l, ok := g.opened[id]; ok {
				delete(g.opened, id)
				g.closeStored(id, l, "its connection's ends are no longer paired")
			}
		}
	}
	clear(g.openByConn)
	for host, id := range g.openByHost {
		if n, ok := g.names.ids[host]; ok && g.hosts[n] != nil && g.hosts[n].beat != 0 {
			continue // heard: its heartbeats say
		}
		delete(g.openByHost, host)
		if l, ok := g.opened[id]; ok {
			delete(g.opened, id)
			g.closeStored(id, l, "the host's heartbeats are no longer in the stream")
		}
	}
}

// reopenedHost returns the open host-silent finding of the stream on a
// host, and forgets it.
func (g *Engine) reopenedHost(host string) (uint64, bool) {
	id, ok := g.openByHost[host]
	if !ok {
		return 0, false
	}
	delete(g.openByHost, host)
	_, ok = g.opened[id]
	delete(g.opened, id)
	return id, ok
}

// closeStored gives the resolution of an open finding known from its line.
func (g *Engine) closeStored(id uint64, l openLine, why string) {
	rid := idOf("resolution", fmt.Sprint(id))
	if g.judged[rid] {
		return
	}
	g.judged[rid] = true
	now := time.Unix(0, g.now).UTC()
	f := apm.Finding{ID: rid, Kind: l.Kind, Severity: apm.SevInfo, FirstTime: now, LastTime: now, Resolved: true, Resolves: id,
		Explanation: fmt.Sprintf("finding %d no longer holds: %s", id, why)}
	r := hostLine(f, l.Host)
	r.Hosts, r.Connection, r.Partition = l.Hosts, l.Connection, l.Partition
	g.emit(r)
}
