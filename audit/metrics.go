package audit

import (
	"context"
	"regexp"
	"strconv"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/internal/metricsrv"
	"github.com/apmwatch/apmwatch/internal/version"
	"github.com/apmwatch/apmwatch/rdmanl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics is every series the daemon exports (docs/audit.md lists them).
// It has its own registry: nothing from the default one leaks in.
type metrics struct {
	reg *prometheus.Registry

	events             *prometheus.CounterVec // kind, device
	findings           *prometheus.CounterVec // kind, severity
	resolutions        *prometheus.CounterVec // kind
	openFindings       *prometheus.GaugeVec   // kind
	qps                *prometheus.GaugeVec   // device, mig_state (rdma netlink)
	modelQPs           prometheus.Gauge
	migrations         *prometheus.CounterVec // device, result
	unprotected        prometheus.Histogram
	lost               prometheus.Counter
	decodeErrors       prometheus.Counter
	hooks              *prometheus.GaugeVec // method
	hookAttached       *prometheus.GaugeVec // hook, module, carries, failed
	sourceUp           prometheus.Gauge
	sourceRestarts     *prometheus.CounterVec // reason
	reconciles         *prometheus.CounterVec // result
	unseenQPs          prometheus.Counter
	recorderUp         prometheus.Gauge
	recorderErrors     prometheus.Counter
	recorderBytes      prometheus.Gauge
	bundles            *prometheus.CounterVec // result
	findingWriteErrors *prometheus.CounterVec // output
	findingsPending    prometheus.Gauge
	findingsDropped    prometheus.Counter
}

const ns = "apmwatch"

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_total",
		Help: "Events decoded from the probes, by kind and RDMA device."}, []string{"kind", "device"})
	m.findings = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "findings_total",
		Help: "New findings, by kind and severity (resolutions not counted)."}, []string{"kind", "severity"})
	m.resolutions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "resolutions_total",
		Help: "Findings resolved, by kind."}, []string{"kind"})
	m.openFindings = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "open_findings",
		Help: "Findings of severity warning and above neither resolved nor closed by their QP's destruction, by kind."}, []string{"kind"})
	m.qps = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "qps",
		Help: "RC/UC/XRC QPs by path-migration state, from the last rdma netlink reading."}, []string{"device", "mig_state"})
	m.modelQPs = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "model_qps",
		Help: "QP histories the APM model holds."})
	m.migrations = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "migrations_total",
		Help: "Path migration events (PATH_MIG: ok, PATH_MIG_ERR: error), by device."}, []string{"device", "result"})
	m.unprotected = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "unprotected_seconds",
		Help:    "Time from a migration to the late rearm that resolved a missed-rearm.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400}})
	m.lost = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "lost_events_total",
		Help: "Events the probes could not deliver (ring buffer full, or a probe run the kernel skipped), over every attach."})
	m.decodeErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "decode_errors_total",
		Help: "Probe records that did not decode."})
	m.hooks = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "hooks",
		Help: "Probe hooks by attach method (fentry, kprobe, tracepoint, missing, skipped)."}, []string{"method"})
	m.sourceUp = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "probes_up",
		Help: "1 while the probes are attached and see every APM signal (modify, QP events, CM notify); 0 when detached or blind to one."})
	m.hookAttached = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "hook_attached",
		Help: "Per probe hook: 1 attached, 0 not (missing from the kernel, skipped, or failed: failed=\"true\"). carries names the APM signal it carries, if any."},
		[]string{"hook", "module", "carries", "failed"})
	m.sourceRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "probe_reattach_total",
		Help: "Times the probes were detached and attached again, by reason."}, []string{"reason"})
	m.reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "reconciles_total",
		Help: "rdma netlink readings, by result (ok, error)."}, []string{"result"})
	m.unseenQPs = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "unseen_qps_total",
		Help: "QPs rdma netlink listed that the probes never saw (untraced paths, QPs older than the daemon)."})
	m.recorderUp = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "recorder_up",
		Help: "1 while the flight recorder writes."})
	m.recorderErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "recorder_errors_total",
		Help: "Flight recorder failures (it is dropped and retried)."})
	m.recorderBytes = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "recorder_bytes",
		Help: "Bytes the flight recorder's files take."})
	m.bundles = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "bundles_total",
		Help: "Incident bundles, by result (written, error)."}, []string{"result"})
	m.findingWriteErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "finding_write_errors_total",
		Help: "Failed writes of finding lines, by output (file, stdout)."}, []string{"output"})
	m.findingsPending = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "findings_pending",
		Help: "Finding lines waiting in memory for the file (disk full)."})
	m.findingsDropped = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "findings_dropped_total",
		Help: "Finding lines dropped because the file could not take them for too long."})
	for _, c := range []prometheus.Collector{m.events, m.findings, m.resolutions, m.openFindings, m.qps, m.modelQPs,
		m.migrations, m.unprotected, m.lost, m.decodeErrors, m.hooks, m.hookAttached, m.sourceUp, m.sourceRestarts, m.reconciles,
		m.unseenQPs, m.recorderUp, m.recorderErrors, m.recorderBytes, m.bundles, m.findingWriteErrors,
		m.findingsPending, m.findingsDropped} {
		f(c)
	}
	v := version.Get()
	bi := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "build_info",
		Help: "Build information: version, commit and Go version; always 1."}, []string{"version", "commit", "goversion"})
	bi.WithLabelValues(v.Version, v.Commit, v.Go).Set(1)
	f(bi)
	// The default Go series plus the live heap as the last GC marked it
	// (go_gc_heap_live_bytes): unlike the heap in use, it does not swing
	// with the GC's cycle, so a slow leak shows in it
	f(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})))
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// setHooks publishes how the probes are attached.
func (m *metrics) setHooks(hooks []event.Hook) {
	m.hooks.Reset()
	for _, meth := range []event.HookMethod{event.HookFentry, event.HookKprobe, event.HookTracepoint, event.HookMissing, event.HookSkipped} {
		m.hooks.WithLabelValues(string(meth)).Set(0)
	}
	m.hookAttached.Reset()
	for _, h := range hooks {
		m.hooks.WithLabelValues(string(h.Method)).Inc()
		on := 0.0
		switch h.Method {
		case event.HookFentry, event.HookKprobe, event.HookTracepoint:
			on = 1
		}
		m.hookAttached.WithLabelValues(deviceLabel(h.Name), deviceLabel(h.Module), h.Carries, strconv.FormatBool(h.Failed)).Set(on)
	}
}

// countEvent counts one event by kind and device, and a migration by
// result.
func (m *metrics) countEvent(e *event.Event) {
	dev := deviceLabel(e.Device)
	m.events.WithLabelValues(e.Kind.String(), dev).Inc()
	if e.QP != nil && (e.QP.Type == event.EvPathMig || e.QP.Type == event.EvPathMigErr) {
		res := "ok"
		if e.QP.Type == event.EvPathMigErr {
			res = "error"
		}
		m.migrations.WithLabelValues(dev, res).Inc()
	}
}

// deviceLabel is a device name as a label value: escaped (internal/escape),
// since client_golang panics on a label value that is not UTF-8 and the
// name comes from the kernel as bytes.
func deviceLabel(dev string) string {
	if dev == "" {
		return "none"
	}
	return escape.Text(dev)
}

// reading counts one rdma netlink reading and publishes its QPs by
// path-migration state. The ground-truth source calls it from the reader
// goroutine: it touches only the metrics.
func (m *metrics) reading(snap rdmanl.Snapshot, err error) {
	if err != nil {
		m.reconciles.WithLabelValues("error").Inc()
		return
	}
	m.reconciles.WithLabelValues("ok").Inc()
	m.qps.Reset()
	for _, q := range snap.QPs {
		if q.HasPathMig {
			m.qps.WithLabelValues(deviceLabel(q.Device), q.PathMig.String()).Inc()
		}
	}
}

// counted keeps a source's counters, which start again at every attach,
// adding up in the exported counters.
type counted struct{ lost, decode uint64 }

func (m *metrics) addStats(prev *counted, s event.Stats) {
	if s.Dropped() > prev.lost {
		m.lost.Add(float64(s.Dropped() - prev.lost))
		prev.lost = s.Dropped()
	}
	if s.DecodeErrs > prev.decode {
		m.decodeErrors.Add(float64(s.DecodeErrs - prev.decode))
		prev.decode = s.DecodeErrs
	}
}

// serve listens on addr and serves /metrics until ctx is done. The
// listener is opened before it returns, so a bad or busy address is an
// error at start.
func (m *metrics) serve(ctx context.Context, addr string, profiles bool, webConfig string, onErr func(error)) error {
	opts := []metricsrv.Option{metricsrv.WithWebConfig(webConfig)}
	if profiles {
		opts = append(opts, metricsrv.WithProfiles())
	}
	return metricsrv.Serve(ctx, addr, m.reg, "apmwatch audit: metrics at /metrics", onErr, opts...)
}
