package audit

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/internal/metricsrv"
)

// Config is everything `apmwatch audit` takes from its flags.
type Config struct {
	// Findings is the finding log (JSON lines, appended); "" for none.
	Findings string
	// Stdout also writes the finding lines to standard output (journald,
	// container logs). Without Findings they go there anyway
	// (FindingsToStdout).
	Stdout bool
	// MetricsAddr is where /metrics is served; "" for no metrics.
	MetricsAddr string
	// Profiles also serves the Go runtime's profiles at /debug/pprof/ on
	// MetricsAddr, which must then be a loopback address.
	Profiles bool
	// WebConfig is a Prometheus web configuration file (TLS, basic auth)
	// for MetricsAddr; "" serves plain HTTP to anyone who can connect.
	WebConfig string
	// RecorderDir holds the flight recorder and the incident bundles; ""
	// for neither.
	RecorderDir string
	// RecorderMaxAge and RecorderMaxBytes bound the flight recorder: files
	// older than the age or beyond the byte budget (oldest first) go.
	RecorderMaxAge   time.Duration
	RecorderMaxBytes int64
	// BundleBefore is how much recording before a finding's first event a
	// bundle holds; BundleAfter how long after the finding it is written
	// (so that the resolution and what followed are in it).
	BundleBefore time.Duration
	BundleAfter  time.Duration
	// MaxBundles bounds the bundles kept in RecorderDir/incidents.
	MaxBundles int
	// ReconcileInterval is how often rdma netlink is read; 0: never.
	ReconcileInterval time.Duration
	// ModuleCheck is how often the ib modules are checked for a reload
	// (the probes are re-attached then); 0: never.
	ModuleCheck time.Duration
	// ReadyFile is written (the hooks, as JSON) once the probes are attached.
	ReadyFile string
	// Model holds the APM thresholds.
	Model apm.Config
	// Actor, when set, observes every event and acts on findings.
	Actor Actor
	// Device restricts the daemon to one RDMA device ("" for all): the
	// events and rdma netlink rows of others are dropped.
	Device string
	// Host is the host name the daemon reports as ("" for the probes').
	Host string
	// Sink, when set, gets every event, finding line and tick (for
	// example a publisher to NATS).
	Sink Sink
	// NoRestore starts afresh: what earlier runs of this boot left open
	// (the flight recorder, the finding log) is not rebuilt (restore.go).
	NoRestore bool
}

// DefaultConfig returns the documented defaults (docs/audit.md).
func DefaultConfig() Config {
	return Config{
		MetricsAddr:       "127.0.0.1:9578",
		RecorderMaxAge:    15 * time.Minute,
		RecorderMaxBytes:  256 << 20,
		BundleBefore:      2 * time.Minute,
		BundleAfter:       10 * time.Second,
		MaxBundles:        50,
		ReconcileInterval: 10 * time.Second,
		ModuleCheck:       2 * time.Second,
		Model:             apm.DefaultConfig(),
	}
}

// minRecorderBytes keeps the flight recorder's files (an eighth of the
// budget each) above a useful size.
const minRecorderBytes = 1 << 20

// Validate reports the first bad option in one lowercase line.
// FindingsToStdout says whether the finding lines go to standard output:
// when asked (--stdout), and when there is no findings file, so that a
// daemon never drops them silently (under systemd they reach the journal).
func (c Config) FindingsToStdout() bool { return c.Stdout || c.Findings == "" }

func (c Config) Validate() error {
	var errs []error
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("bad --metrics-addr %q: want host:port", c.MetricsAddr))
		}
	}
	if err := c.checkProfiles(); err != nil {
		errs = append(errs, err)
	}
	if err := c.checkWebConfig(); err != nil {
		errs = append(errs, err)
	}
	if c.RecorderMaxAge < 0 {
		errs = append(errs, fmt.Errorf("--recorder-max-age must not be negative: %v", c.RecorderMaxAge))
	}
	if c.RecorderDir != "" && c.RecorderMaxBytes < minRecorderBytes {
		errs = append(errs, fmt.Errorf("--recorder-max-bytes must be at least %d: %d", minRecorderBytes, c.RecorderMaxBytes))
	}
	if c.BundleBefore < 0 || c.BundleAfter < 0 {
		errs = append(errs, errors.New("--bundle-before and --bundle-after must not be negative"))
	}
	if c.RecorderDir != "" && c.MaxBundles < 1 {
		errs = append(errs, fmt.Errorf("--max-bundles must be at least 1: %d", c.MaxBundles))
	}
	if c.ReconcileInterval < 0 || (c.ReconcileInterval > 0 && c.ReconcileInterval < 100*time.Millisecond) {
		errs = append(errs, fmt.Errorf("--reconcile-interval must be 0 (off) or at least 100ms: %v", c.ReconcileInterval))
	}
	if c.ModuleCheck < 0 {
		errs = append(errs, fmt.Errorf("module check interval must not be negative: %v", c.ModuleCheck))
	}
	if err := c.Model.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// checkProfiles allows --pprof only on a loopback metrics address: the
// profiles show the daemon's memory, which holds host data.
func (c Config) checkProfiles() error {
	if !c.Profiles {
		return nil
	}
	return metricsrv.CheckProfilesAddr(c.MetricsAddr)
}

// checkWebConfig loads --web.config.file as the metrics endpoint will, so
// that a bad file stops the start with one line.
func (c Config) checkWebConfig() error {
	if c.WebConfig == "" {
		return nil
	}
	if c.MetricsAddr == "" {
		return errors.New("--web.config.file needs --metrics-addr")
	}
	return metricsrv.CheckWebConfig(c.WebConfig)
}
