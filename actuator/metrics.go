package actuator

import "github.com/prometheus/client_golang/prometheus"

// enforcerActions is the enforcer's counters as one Prometheus metric (the
// audit daemon registers an actor's Metrics).
var enforcerActions = prometheus.NewDesc("apmwatch_enforcer_actions_total",
	"What audit --enforce did with the findings it may act on, by outcome: actuated, would-actuate (monitor mode), "+
		"skipped, failed, dropped (the QP rearmed in the grace period, or changed hands; dropped-lost counts those "+
		"dropped because events were lost around them), deferred (rate limit).",
	[]string{"outcome"}, nil)

// Metrics is the enforcer's counters (Stats) as a prometheus.Collector.
func (e *Enforcer) Metrics() prometheus.Collector { return enforcerMetrics{e} }

type enforcerMetrics struct{ e *Enforcer }

func (m enforcerMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- enforcerActions }

func (m enforcerMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.e.Stats()
	for _, c := range []struct {
		outcome string
		n       uint64
	}{{"actuated", s.Actuated}, {"would-actuate", s.WouldActuate}, {"skipped", s.Skipped}, {"failed", s.Failed},
		{"dropped", s.Dropped}, {"dropped-lost", s.DroppedLost}, {"deferred", s.Deferred}} {
		ch <- prometheus.MustNewConstMetric(enforcerActions, prometheus.CounterValue, float64(c.n), c.outcome)
	}
}
