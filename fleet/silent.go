package fleet

import (
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// A host heard to heartbeat is live while the stream's clock is within
// SilentAfter of its latest heartbeat; past that it is silent: one
// host-silent finding, naming when it was last heard and how many ends it
// holds here, and its resolution when it is heard again. What its ends
// say is then unknown, not what their last records said (fleet status),
// and its pairs wait: its silence alone judges none of them (clock.go). A
// host never heard to heartbeat is never silent (its publisher does not
// heartbeat). The stream's clock stands still while the instance lags,
// so a consumer behind the stream finds no host silent; and a stretch in
// which the stream stored nothing from any host counts for no host's
// silence past a third of SilentAfter (receivedAt).

// DefaultSilentAfter is how long a host may go unheard: three heartbeats.
const DefaultSilentAfter = 3 * wire.DefaultHeartbeatEvery

const remedySilent = "check the host's apmwatch audit daemon (running, --publish), its link to NATS (apmwatch_nats_connected) " +
	"and its publish queue (apmwatch_publish_queue_bytes); a host taken out of service stays silent until its subjects " +
	"(apmwatch.conn.*.<host>.>) are purged from APMWATCH_CONN and the fleet instances restarted"

// checkSilent finds the hosts silent by the stream's clock now.
func (g *Engine) checkSilent() {
	for id, h := range g.hosts {
		if h.beat == 0 || h.silent || g.now-h.beat-(g.unheard-h.unheardAt) <= int64(g.cfg.SilentAfter) {
			continue
		}
		h.silent = true
		g.silentFinding(id, h)
	}
}

// owns reports whether this engine gives the host's findings.
func (g *Engine) owns(host string) bool { return g.cfg.OwnsHost == nil || g.cfg.OwnsHost(host) }

func (g *Engine) silentFinding(id uint32, h *hostClock) {
	host := g.names.name(id)
	fid := idOf(string(apm.HostSilent), host, fmt.Sprint(h.beat))
	h.open = fid
	if !g.owns(host) || g.judged[fid] {
		return
	}
	g.judged[fid] = true
	last := time.Unix(0, h.beat).UTC()
	ends := g.hostEnds[id]
	what := fmt.Sprintf("%s: last heard at %s (stream time; its clock said %s, run %s), nothing since by %s",
		host, last.Format(time.RFC3339Nano), time.Unix(0, h.beatAt).UTC().Format(time.RFC3339Nano), h.run,
		time.Unix(0, g.now).UTC().Format(time.RFC3339Nano))
	if u := time.Duration(g.unheard - h.unheardAt); u > 0 {
		what += fmt.Sprintf(" (%v of it with nothing stored by any host, not counted)", u.Round(time.Millisecond))
	}
	f := apm.Finding{ID: fid, Kind: apm.HostSilent, Severity: sevOf(apm.HostSilent), FirstTime: last, LastTime: time.Unix(0, g.now).UTC(),
		Evidence: []apm.Evidence{{What: what}},
		Explanation: fmt.Sprintf("%s has not been heard for more than %v: the state of its %d connection ends judged here is unknown "+
			"(not judged on its silence)", host, g.cfg.SilentAfter, ends),
		Remediation: remedySilent}
	g.emit(hostLine(f, host))
}

// heardAgain ends a host's silence: the resolution of its finding.
func (g *Engine) heardAgain(id uint32, h *hostClock) {
	h.silent = false
	open := h.open
	h.open = 0
	host := g.names.name(id)
	rid := idOf("resolution", fmt.Sprint(open))
	if open == 0 || !g.owns(host) || g.judged[rid] {
		return
	}
	g.judged[rid] = true
	at := time.Unix(0, h.beat).UTC()
	f := apm.Finding{ID: rid, Kind: apm.HostSilent, Severity: apm.SevInfo, FirstTime: at, LastTime: at, Resolved: true, Resolves: open,
		Evidence:    []apm.Evidence{{What: fmt.Sprintf("%s: heard again at %s (stream time), run %s", host, at.Format(time.RFC3339Nano), h.run)}},
		Explanation: fmt.Sprintf("%s is heard again", host)}
	g.emit(hostLine(f, host))
}

// hostLine is the line of a finding on a host rather than a connection.
func hostLine(f apm.Finding, host string) Line {
	return Line{Line: findingline.New(f, host), Hosts: []string{host}, Partition: HostPartition(host)}
}

// HostPartition is the partition whose instance gives a host's findings.
func HostPartition(host string) int {
	h := fnv.New32a()
	h.Write([]byte(wire.Token(host)))
	return int(uint64(h.Sum32()) * 0x9E3779B97F4A7C15 >> 58 % wire.Partitions)
}

// Silent reports whether the host (its subject token) is silent now.
func (g *Engine) Silent(host string) bool {
	id, ok := g.names.ids[host]
	return ok && g.hosts[id] != nil && g.hosts[id].silent
}

func sortHostClocks(hs []HostClock) {
	sort.Slice(hs, func(i, j int) bool { return hs[i].Host < hs[j].Host })
}
