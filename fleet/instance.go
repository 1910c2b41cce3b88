package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/metricsrv"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is what `apmwatch fleet` takes from its flags.
type Config struct {
	NATS        natsconn.NATSOptions // URL "": serve an embedded NATS
	Listen      string               // the embedded server's address
	StoreDir    string               // the embedded server's JetStream store
	Auth        string               // the embedded server's users (ServerConfig.AuthFile)
	TLSCert     string               // the embedded server's TLS (ServerConfig)
	TLSKey      string
	TLSCA       string
	TLSVerify   bool
	Monitor     string // the embedded server's monitoring address
	ReadyFile   string // written once the instance consumes
	Findings    string // append finding lines here
	Stdout      bool   // also to standard output (always without Findings)
	MetricsAddr string
	Profiles    bool          // also serve the Go runtime's profiles on MetricsAddr (loopback only)
	Instance    int           // this instance's index, from 0
	Instances   int           // how many share the partitions
	LeaseTTL    time.Duration // a share's lease lasts this long unrenewed (takeover.go)
	Engine      EngineConfig
	Limits      natsconn.StreamLimits
	// hold, when set, is called before each message and tick is handled
	// (a test holds the instance back: a consumer that lags)
	hold func()
	// keepLeases, set by a test, has the instance leave its leases to
	// expire at exit, as one that dies does
	keepLeases bool

	// Reload, when it delivers, has the embedded server read Auth again
	// (SIGHUP).
	Reload <-chan os.Signal
}

// DefaultConfig returns the documented defaults (docs/fleet.md).
func DefaultConfig() Config {
	return Config{Listen: natsserver.DefaultListen, MetricsAddr: "127.0.0.1:9579", Instances: 1, LeaseTTL: DefaultLeaseTTL,
		Engine: EngineConfig{Deadline: 2 * time.Second}, Limits: natsconn.DefaultLimits}
}

// Validate reports the first bad option in one line.
func (c Config) Validate() error {
	switch {
	case c.Instances < 1 || c.Instances > wire.Partitions:
		return fmt.Errorf("--instances must be 1 to %d: %d", wire.Partitions, c.Instances)
	case c.Instance < 0 || c.Instance >= c.Instances:
		return fmt.Errorf("--instance must be 0 to %d: %d", c.Instances-1, c.Instance)
	case c.LeaseTTL < minLeaseTTL || c.LeaseTTL > maxLeaseTTL:
		return fmt.Errorf("--lease-ttl must be %v to %v: %v", minLeaseTTL, maxLeaseTTL, c.LeaseTTL)
	case c.Engine.Deadline <= 0:
		return fmt.Errorf("--rearm-deadline must be positive: %v", c.Engine.Deadline)
	case c.NATS.URL == "" && c.StoreDir == "":
		return errors.New("the embedded nats needs --store DIR")
	case c.NATS.URL != "" && (c.Auth != "" || c.TLSCert != "" || c.TLSCA != "" || c.TLSVerify || c.Monitor != ""):
		return errors.New("--auth, --tls-cert, --tls-key, --tls-ca, --tls-verify and --monitor are the embedded nats's: not with --nats")
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if c.Profiles {
		if err := metricsrv.CheckProfilesAddr(c.MetricsAddr); err != nil {
			return err
		}
	}
	if c.NATS.URL == "" {
		if err := c.server().Validate(); err != nil {
			return err
		}
	}
	return c.NATS.Validate()
}

// server is the embedded server's configuration.
func (c Config) server() natsserver.ServerConfig {
	return natsserver.ServerConfig{Listen: c.Listen, StoreDir: c.StoreDir, AuthFile: c.Auth, TLSCert: c.TLSCert, TLSKey: c.TLSKey,
		TLSCA: c.TLSCA, TLSVerify: c.TLSVerify, Monitor: c.Monitor}
}

// partitions returns the partitions of this instance's home share.
func (c Config) partitions() []int { return sharePartitions(c.Instance, c.Instances) }

// Ready is the ready file's content.
type Ready struct {
	NATS       string `json:"nats"`
	Instance   int    `json:"instance"`
	Instances  int    `json:"instances"`
	Partitions []int  `json:"partitions"` // of the shares it holds
	Shares     []int  `json:"shares"`     // the shares it holds (takeover.go)
	Ends       int    `json:"ends"`       // its home share's, rebuilt from the stream
}

// instance is one running fleet instance.
type instance struct {
	cfg   Config
	log   *slog.Logger
	js    jetstream.JetStream
	fence *fence
	out   []io.Writer
	m     *fleetMetrics
	url   string
	// embedded: the server is this process's, of a known version
	embedded bool
}

// Run runs a fleet instance until ctx is done.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if p, env := tuneGC(); env {
		log.Info("gc target from GOGC", "percent", p)
	}
	in := &instance{cfg: cfg, log: log, m: newFleetMetrics()}
	in.m.shares.Set(float64(cfg.Instances))
	var srv *natsserver.Embedded
	if cfg.NATS.URL == "" {
		var err error
		srv, err = natsserver.StartServer(cfg.server())
		if err != nil {
			return err
		}
		defer srv.Shutdown()
		cfg.NATS = srv.ClientOptions() // in-process, as the fleet's own user
		in.embedded, in.url = true, srv.URL()
		log.Info("embedded nats serving", "url", in.url, "store", cfg.StoreDir, "auth", cfg.Auth != "",
			"tls", cfg.TLSCert != "", "monitor", srv.MonitorURL())
	} else {
		in.url = cfg.NATS.URL
	}
	cfg.NATS.Name = fmt.Sprintf("apmwatch fleet %d/%d", cfg.Instance, cfg.Instances)
	cfg.NATS.Log = log
	nc, err := cfg.NATS.Connect(true)
	if err != nil {
		return err
	}
	defer nc.Close()
	if in.js, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	var flog *findingsFile
	if cfg.Findings != "" {
		if flog, err = openFindingsFile(cfg.Findings); err != nil {
			return err
		}
		defer flog.Close()
		in.out = append(in.out, flog)
	}
	if cfg.Reload != nil {
		go reloadOn(ctx, cfg.Reload, srv, flog, log)
	}
	if cfg.Stdout || cfg.Findings == "" {
		in.out = append(in.out, stdout)
	}
	mctx, stopMetrics := context.WithCancel(context.Background())
	defer stopMetrics()
	if cfg.MetricsAddr != "" {
		if err := in.m.serve(mctx, cfg.MetricsAddr, cfg.Profiles, func(err error) { log.Error("metrics server stopped", "err", err) }); err != nil {
			return err
		}
	}
	if err := in.waitStreams(ctx, nc); err != nil {
		return err
	}
	in.fence = newFence(in.js, in.out, in.m, log)
	defer in.fence.close(5 * time.Second)
	return in.takeover(ctx)
}

// waitStreams creates the streams, waiting for NATS as long as it takes;
// a server too old, or an account that refuses the streams or the API,
// ends the instance at once: waiting would not change them.
func (in *instance) waitStreams(ctx context.Context, nc *nats.Conn) error {
	said := false
	for {
		if !in.embedded && nc.IsConnected() {
			if err := natsconn.CheckServerVersion(nc.ConnectedServerVersion(), "apmwatch fleet"); err != nil {
				return err
			}
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := natsconn.EnsureStreams(c, in.js, in.cfg.Limits)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		var d *natsconn.DeniedError
		if errors.Is(err, natsconn.ErrCreateStreams) || errors.Is(err, natsconn.ErrJetStreamDisabled) || errors.As(err, &d) {
			return err
		}
		if !said {
			in.log.Warn("waiting for nats", "url", in.url, "err", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func writeReady(path string, r Ready) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := outfile.WriteFile(path+".tmp", append(b, '\n')); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// reloadOn, at each signal until ctx is done, reopens the finding log
// (after logrotate moved it) and has srv read its auth file again, logging
// what came of each; without an embedded server or its --auth a signal
// only says so.
func reloadOn(ctx context.Context, sig <-chan os.Signal, srv *natsserver.Embedded, flog *findingsFile, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if flog != nil {
				if err := flog.Reopen(); err != nil {
					log.Error("the finding log was not reopened: lines go to the file as it was", "err", err)
				} else {
					log.Info("finding log reopened", "path", flog.path)
				}
			}
			if srv == nil || srv.Config.AuthFile == "" {
				log.Info("embedded nats: no --auth file to reload")
				continue
			}
			if err := srv.Reload(); err != nil {
				log.Error("embedded nats: the users were not reloaded", "err", err)
				continue
			}
			log.Info("embedded nats: users reloaded", "auth", srv.Config.AuthFile)
		}
	}
}
