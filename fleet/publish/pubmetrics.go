package publish

import (
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// pubMetrics are the publisher's series (docs/fleet.md).
type pubMetrics struct {
	queued  *prometheus.CounterVec // type
	dropped *prometheus.CounterVec // reason
	sent    prometheus.Counter
	errors  prometheus.Counter
	gauges  []prometheus.Collector
}

func newPubMetrics(q *Queue, nc *nats.Conn) pubMetrics {
	m := pubMetrics{
		queued: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "apmwatch", Name: "publish_queued_total",
			Help: "Messages handed to the publish queue, by type (conn, finding)."}, []string{"type"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "apmwatch", Name: "publish_dropped_total",
			Help: "Messages lost before reaching the publish queue, by reason (intake-full: finding lines while the queue writer fell behind, connection records wait instead; disk-error)."}, []string{"reason"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "apmwatch", Name: "published_total",
			Help: "Messages JetStream acknowledged."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "apmwatch", Name: "publish_errors_total",
			Help: "Failed publish attempts (NATS away or refusing); the messages stay queued."}),
	}
	m.gauges = []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "apmwatch", Name: "publish_queue_bytes",
			Help: "Bytes of the on-disk publish queue."}, func() float64 { return float64(q.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "apmwatch", Name: "publish_queue_messages",
			Help: "Messages waiting in the publish queue for NATS."}, func() float64 { return float64(q.Stats().Pending) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "apmwatch", Name: "publish_queue_lost_total",
			Help: "Messages dropped from the publish queue past its bound, all types."}, func() float64 { return float64(q.Stats().Dropped) }),
		lostByType(q, "conn", func(st QueueStats) uint64 { return st.DroppedConn }),
		lostByType(q, "finding", func(st QueueStats) uint64 { return st.DroppedFindings }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "apmwatch", Name: "publish_queue_corrupt_total",
			Help: "Damaged stretches of the publish queue skipped (a crash's torn frame, a page not written)."}, func() float64 { return float64(q.Stats().Corrupt) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "apmwatch", Name: "nats_connected",
			Help: "1 while connected to NATS."}, func() float64 {
			if nc.IsConnected() {
				return 1
			}
			return 0
		}),
	}
	return m
}

// lostByType is apmwatch_publish_queue_lost_by_type_total{type}: past
// its bound the queue drops connection records before finding lines.
func lostByType(q *Queue, typ string, n func(QueueStats) uint64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "apmwatch", Name: "publish_queue_lost_by_type_total",
		Help:        "Messages dropped from the publish queue past its bound, by type (conn: replaced records first, then the oldest; finding: only when no record is left).",
		ConstLabels: prometheus.Labels{"type": typ}}, func() float64 { return float64(n(q.Stats())) })
}

func (m *pubMetrics) all() []prometheus.Collector {
	return append([]prometheus.Collector{m.queued, m.dropped, m.sent, m.errors}, m.gauges...)
}

func (m *pubMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

func (m *pubMetrics) collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}
