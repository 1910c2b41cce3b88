package fleet

import (
	"context"
	"sync"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/internal/metricsrv"
	"github.com/apmwatch/apmwatch/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// fleetMetrics are a fleet instance's series (docs/fleet.md).
type fleetMetrics struct {
	mu               sync.Mutex
	held             map[int]shareSnap // by share held: its engine's counts, as last added
	reg              *prometheus.Registry
	connections      *prometheus.GaugeVec // state
	unpaired         prometheus.Gauge
	ends             prometheus.Gauge
	records          prometheus.Counter
	badRecords       prometheus.Counter
	staleRecords     prometheus.Gauge
	lagMessages      prometheus.Gauge
	lagSeconds       prometheus.Gauge
	findings         *prometheus.CounterVec // kind, type
	publishErrors    prometheus.Counter
	refused          *prometheus.CounterVec // reason
	hostSilent       *prometheus.GaugeVec   // host
	hostHeard        *prometheus.GaugeVec   // host
	hostOffset       *prometheus.GaugeVec   // host
	shareOwned       *prometheus.GaugeVec   // share
	shares           prometheus.Gauge       // --instances
	takeovers        prometheus.Counter
	shareRestarts    prometheus.Counter
	fencedDuplicates prometheus.Counter
}

func newFleetMetrics() *fleetMetrics {
	m := &fleetMetrics{reg: prometheus.NewRegistry(), held: map[int]shareSnap{}}
	m.connections = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "connections",
		Help: "Paired connections of this instance's partitions, by pair state (no-apm, armed, half-armed, one-sided, unprotected)."}, []string{"state"})
	m.unpaired = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "unpaired_ends",
		Help: "Connection ends whose peer has no record."})
	m.ends = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "ends",
		Help: "Connection ends tracked."})
	m.records = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "records_total",
		Help: "Connection records consumed."})
	m.badRecords = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "bad_records_total",
		Help: "Connection records that did not decode."})
	m.staleRecords = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "stale_records",
		Help: "Records older than the one already applied for their end, since start."})
	m.lagMessages = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "lag_messages",
		Help: "Records in the stream not yet consumed by this instance."})
	m.lagSeconds = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "lag_seconds",
		Help: "Age of the last record consumed (now minus when the stream stored it)."})
	m.findings = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "findings_total",
		Help: "Findings and resolutions given, by kind and type."}, []string{"kind", "type"})
	m.publishErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "publish_errors_total",
		Help: "Finding publishes JetStream did not acknowledge (each is sent again)."})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "records_refused_total",
		Help: "Connection records refused, by reason: too-large, bad-subject, undecodable, subject-mismatch (host, device, QPN or partition not the subject's), " +
			"future (dated past --max-skew after their receipt), claimed (another host's end), host-ends (the host holds its bound of ends)."}, []string{"reason"})
	for r := range nRefusals {
		m.refused.WithLabelValues(r.String())
	}
	m.findings.WithLabelValues(string(apm.HostSilent), "finding") // from 0: an alert sees the first
	m.hostSilent = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "host_silent",
		Help: "1 while a host that heartbeats has not been heard for --silent-after (a host-silent finding), else 0."}, []string{"host"})
	m.hostHeard = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "host_last_heard_seconds",
		Help: "When a host's latest heartbeat was stored, Unix seconds (the stream's clock)."}, []string{"host"})
	m.hostOffset = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "host_clock_offset_seconds",
		Help: "A host's clock minus the stream's, at its latest heartbeat (its at minus when it was stored)."}, []string{"host"})
	m.shareOwned = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "share_owned",
		Help: "1 while this instance holds a share's lease and judges its partitions, else 0."}, []string{"share"})
	m.shares = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "shares",
		Help: "Shares the partitions are divided into (--instances): each must be held by one instance (share_owned) to be judged."})
	m.takeovers = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "takeovers_total",
		Help: "Shares of another (home) instance this instance adopted, their lease having expired."})
	m.shareRestarts = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "share_restarts_total",
		Help: "Shares whose engine failed (NATS timed out or lost a consumer, as while a cluster elects a leader) and were rebuilt from the stream."})
	m.fencedDuplicates = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "apmwatch", Subsystem: "fleet", Name: "duplicate_findings_total",
		Help: "Findings the findings stream already held (another instance gave them first): not written."})
	v := version.Get()
	info := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "apmwatch", Name: "build_info", Help: "Always 1.",
		ConstLabels: prometheus.Labels{"version": v.Version, "commit": v.Commit, "goversion": v.Go}})
	info.Set(1)
	m.reg.MustRegister(m.connections, m.unpaired, m.ends, m.records, m.badRecords, m.staleRecords, m.lagMessages, m.lagSeconds,
		m.findings, m.publishErrors, m.refused, m.hostSilent, m.hostHeard, m.hostOffset, m.shareOwned, m.shares, m.takeovers, m.shareRestarts, m.fencedDuplicates, info, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// update sets the series from one engine, as the only share held.
func (m *fleetMetrics) update(g *Engine) { m.updateShare(0, g, true) }

// shareSnap is what a share's engine last said of itself.
type shareSnap struct {
	st      Stats
	stale   uint64
	refused [nRefusals]uint64
}

// updateShare takes share s's engine g's counts (called from its own
// loop) and sets the series from every share this instance holds: the
// connections, ends and refusals of an adopted share count with its own.
// The home share's engine gives the hosts' series (every engine follows
// every host's heartbeats).
func (m *fleetMetrics) updateShare(s int, g *Engine, home bool) {
	snap := shareSnap{st: g.Stats(), stale: g.Stale, refused: g.Refused}
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.held[s]
	for r := range nRefusals {
		if n := snap.refused[r]; n > prev.refused[r] {
			m.refused.WithLabelValues(r.String()).Add(float64(n - prev.refused[r]))
		}
	}
	m.held[s] = snap
	m.setSums()
	if home {
		g.eachHostClock(func(h HostClock) {
			silent := 0.0
			if h.Silent {
				silent = 1
			}
			m.hostSilent.WithLabelValues(h.Host).Set(silent)
			m.hostHeard.WithLabelValues(h.Host).Set(float64(h.LastHeard.UnixNano()) / 1e9)
			m.hostOffset.WithLabelValues(h.Host).Set(h.Offset.Seconds())
		})
	}
}

// dropShare forgets share s's counts: it is no longer held here (a share
// held again starts from a new engine, its counts from 0).
func (m *fleetMetrics) dropShare(s int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, s)
	m.setSums()
}

// setSums sets the per-instance gauges to the sums over the shares held.
// Called with m.mu held.
func (m *fleetMetrics) setSums() {
	by := make([]int, nStates)
	unpaired, ends, stale := 0, 0, uint64(0)
	for _, x := range m.held {
		for st, n := range x.st.ByState {
			by[st] += n
		}
		unpaired += x.st.Unpaired
		ends += x.st.Ends
		stale += x.stale
	}
	for s := StateNoAPM; s < nStates; s++ {
		m.connections.WithLabelValues(s.String()).Set(float64(by[s]))
	}
	m.unpaired.Set(float64(unpaired))
	m.ends.Set(float64(ends))
	m.staleRecords.Set(float64(stale))
}

func (m *fleetMetrics) serve(ctx context.Context, addr string, profiles bool, onErr func(error)) error {
	var opts []metricsrv.Option
	if profiles {
		opts = append(opts, metricsrv.WithProfiles())
	}
	return metricsrv.Serve(ctx, addr, m.reg, "", onErr, opts...)
}
