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

	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is what `apmwatch fleet` takes from its flags.
type Config struct {
	NATS        NATSOptions // URL "": serve an embedded NATS
	Listen      string      // the embedded server's address
	StoreDir    string      // the embedded server's JetStream store
	Auth        string      // the embedded server's users (ServerConfig.AuthFile)
	TLSCert     string      // the embedded server's TLS (ServerConfig)
	TLSKey      string
	TLSCA       string
	TLSVerify   bool
	Monitor     string // the embedded server's monitoring address
	ReadyFile   string // written once the instance consumes
	Findings    string // append finding lines here
	Stdout      bool   // also to standard output (always without Findings)
	MetricsAddr string
	Instance    int // this instance's index, from 0
	Instances   int // how many share the partitions
	Engine      EngineConfig
	Limits      StreamLimits
	// hold, when set, is called before each message and tick is handled
	// (a test holds the instance back: a consumer that lags)
	hold func()

	// Reload, when it delivers, has the embedded server read Auth again
	// (SIGHUP).
	Reload <-chan os.Signal
}

// DefaultConfig returns the documented defaults (docs/fleet.md).
func DefaultConfig() Config {
	return Config{Listen: DefaultListen, MetricsAddr: "127.0.0.1:9579", Instances: 1,
		Engine: EngineConfig{Deadline: 2 * time.Second}, Limits: DefaultLimits}
}

// Validate reports the first bad option in one line.
func (c Config) Validate() error {
	switch {
	case c.Instances < 1 || c.Instances > Partitions:
		return fmt.Errorf("--instances must be 1 to %d: %d", Partitions, c.Instances)
	case c.Instance < 0 || c.Instance >= c.Instances:
		return fmt.Errorf("--instance must be 0 to %d: %d", c.Instances-1, c.Instance)
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
	if c.NATS.URL == "" {
		if err := c.server().Validate(); err != nil {
			return err
		}
	}
	return c.NATS.Validate()
}

// server is the embedded server's configuration.
func (c Config) server() ServerConfig {
	return ServerConfig{Listen: c.Listen, StoreDir: c.StoreDir, AuthFile: c.Auth, TLSCert: c.TLSCert, TLSKey: c.TLSKey,
		TLSCA: c.TLSCA, TLSVerify: c.TLSVerify, Monitor: c.Monitor}
}

// partitions returns the partitions this instance owns.
func (c Config) partitions() []int {
	var ps []int
	for p := range Partitions {
		if p%c.Instances == c.Instance {
			ps = append(ps, p)
		}
	}
	return ps
}

// Ready is the ready file's content.
type Ready struct {
	NATS       string `json:"nats"`
	Instance   int    `json:"instance"`
	Instances  int    `json:"instances"`
	Partitions []int  `json:"partitions"`
	Ends       int    `json:"ends"` // rebuilt from the stream
}

// instance is one running fleet instance.
type instance struct {
	cfg    Config
	log    *slog.Logger
	js     jetstream.JetStream
	engine *Engine
	out    []io.Writer
	m      *fleetMetrics
	url    string
	// embedded: the server is this process's, of a known version
	embedded bool
}

// Run runs a fleet instance until ctx is done.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	in := &instance{cfg: cfg, log: log, m: newFleetMetrics()}
	if cfg.NATS.URL == "" {
		srv, err := StartServer(cfg.server())
		if err != nil {
			return err
		}
		defer srv.Shutdown()
		cfg.NATS = srv.clientOptions() // in-process, as the fleet's own user
		in.embedded, in.url = true, srv.URL()
		log.Info("embedded nats serving", "url", in.url, "store", cfg.StoreDir, "auth", cfg.Auth != "",
			"tls", cfg.TLSCert != "", "monitor", srv.MonitorURL())
		if cfg.Reload != nil {
			go reloadOn(ctx, cfg.Reload, srv, log)
		}
	} else if cfg.Reload != nil {
		go reloadOn(ctx, cfg.Reload, nil, log)
	} else {
		in.url = cfg.NATS.URL
	}
	cfg.NATS.Name = fmt.Sprintf("apmwatch fleet %d/%d", cfg.Instance, cfg.Instances)
	cfg.NATS.Log = log
	nc, err := cfg.NATS.connect(true)
	if err != nil {
		return err
	}
	defer nc.Close()
	if in.js, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if cfg.Findings != "" {
		f, err := outfile.Create(cfg.Findings, os.O_APPEND)
		if err != nil {
			return fmt.Errorf("opening the finding log: %w", err)
		}
		defer f.Close()
		in.out = append(in.out, f)
	}
	if cfg.Stdout || cfg.Findings == "" {
		in.out = append(in.out, stdout)
	}
	mctx, stopMetrics := context.WithCancel(context.Background())
	defer stopMetrics()
	if cfg.MetricsAddr != "" {
		if err := in.m.serve(mctx, cfg.MetricsAddr, func(err error) { log.Error("metrics server stopped", "err", err) }); err != nil {
			return err
		}
	}
	if err := in.waitStreams(ctx, nc); err != nil {
		return err
	}
	n, i := cfg.Instances, cfg.Instance
	cfg.Engine.OwnsHost = func(host string) bool { return HostPartition(host)%n == i }
	in.engine = NewEngine(cfg.Engine, in.emit)
	if err := in.loadJudged(ctx); err != nil {
		return err
	}
	return in.consume(ctx)
}

// waitStreams creates the streams, waiting for NATS as long as it takes;
// a server too old, or an account that refuses the streams or the API,
// ends the instance at once: waiting would not change them.
func (in *instance) waitStreams(ctx context.Context, nc *nats.Conn) error {
	said := false
	for {
		if !in.embedded && nc.IsConnected() {
			if err := checkServerVersion(nc.ConnectedServerVersion(), "apmwatch fleet"); err != nil {
				return err
			}
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := ensureStreams(c, in.js, in.cfg.Limits)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		var d *DeniedError
		if errors.Is(err, ErrCreateStreams) || errors.Is(err, errJetStreamDisabled) || errors.As(err, &d) {
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

// loadJudged reads this instance's partitions' findings from the stream:
// what an earlier run (or a former owner) judged is not judged again.
func (in *instance) loadJudged(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	var filters []string
	for _, p := range in.cfg.partitions() {
		filters = append(filters, fleetFindingSubject(p))
	}
	streams, err := streamsOf(ctx, in.js, filters)
	if err != nil {
		return err
	}
	n := 0
	for name, fs := range streams {
		k, err := readAll(ctx, in.js, name, jetstream.OrderedConsumerConfig{FilterSubjects: fs}, func(m jetstream.Msg) {
			in.engine.Seen(m.Data())
		})
		if err != nil {
			return fmt.Errorf("reading earlier findings: %w", err)
		}
		n += k
	}
	in.log.Info("earlier findings read", "findings", n)
	return nil
}

// readAll delivers every message a consumer has now, then returns.
// A request the server denies ends it at once, with a *DeniedError.
func readAll(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, fn func(jetstream.Msg)) (int, error) {
	ctx, done := guard(ctx, js.Conn())
	defer done()
	c, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return 0, denied(ctx, err)
	}
	pending := c.CachedInfo().NumPending
	n := 0
	for uint64(n) < pending {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return n, err
		}
		got := 0
		for m := range batch.Messages() {
			fn(m)
			n++
			got++
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				pending = uint64(n)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return n, denied(ctx, err)
		}
		var d *DeniedError
		if errors.As(context.Cause(ctx), &d) {
			return n, d
		}
		if got == 0 {
			break
		}
	}
	return n, nil
}

// consume rebuilds the partitions' state from the last record of every
// end, then follows new records, judging as it goes.
func (in *instance) consume(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	var filters []string
	for _, p := range in.cfg.partitions() {
		filters = append(filters, connFilter(p))
	}
	streams, err := streamsOf(ctx, in.js, filters)
	if err != nil {
		return err
	}
	in.followHeartbeats(ctx, streams)
	msgs := make(chan jetstream.Msg, 4096)
	var initial uint64
	clock := newStreamClock()
	for name, fs := range streams {
		c, err := in.js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{FilterSubjects: fs,
			DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
		if err != nil {
			return fmt.Errorf("consuming %s: %w", name, err)
		}
		initial += c.CachedInfo().NumPending
		clock.pending[name] = c.CachedInfo().NumPending
		cc, err := c.Consume(func(m jetstream.Msg) {
			select {
			case msgs <- m:
			case <-ctx.Done():
			}
		})
		if err != nil {
			return fmt.Errorf("consuming %s: %w", name, err)
		}
		defer cc.Stop()
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var applied uint64
	ready := false
	markReady := func() {
		ready = true
		in.engine.CloseUnpaired() // the rebuild is read: what was open on connections gone since is over
		in.log.Info("fleet consuming", "nats", in.url, "instance", in.cfg.Instance, "instances", in.cfg.Instances,
			"rebuilt_ends", len(in.engine.ends))
		if in.cfg.ReadyFile != "" {
			r := Ready{NATS: in.url, Instance: in.cfg.Instance, Instances: in.cfg.Instances, Partitions: in.cfg.partitions(), Ends: len(in.engine.ends)}
			if err := writeReady(in.cfg.ReadyFile, r); err != nil {
				in.log.Error("writing the ready file", "err", err)
			}
		}
	}
	if initial == 0 {
		markReady()
	}
	for {
		select {
		case <-ctx.Done():
			select { // the findings handed to JetStream, stored before exit
			case <-in.js.PublishAsyncComplete():
			case <-time.After(5 * time.Second):
				in.log.Warn("findings not acknowledged by jetstream at exit", "pending", in.js.PublishAsyncPending())
			}
			return nil
		case m := <-msgs:
			if in.cfg.hold != nil {
				in.cfg.hold()
			}
			applied++
			now := time.Now()
			md, mdErr := m.Metadata()
			var stored time.Time
			if mdErr == nil {
				stored = md.Timestamp
				clock.consumed(md.Stream, stored, md.NumPending, now)
			}
			in.take(m, stored, now)
			if mdErr == nil {
				in.m.lagMessages.Set(float64(md.NumPending))
				if !ready && (len(streams) == 1 && md.NumPending == 0 || applied >= initial) {
					markReady()
				}
			}
		case now := <-tick.C:
			if in.cfg.hold != nil {
				in.cfg.hold()
				now = time.Now()
			}
			if at := clock.at(now, in.js.Conn().IsConnected() && len(msgs) == 0); !at.IsZero() {
				in.engine.Advance(at)
			}
			in.m.update(in.engine)
		}
	}
}

// followHeartbeats adds the hosts' heartbeats to what the instance
// consumes when they are in the one stream of its records (so that it
// reads a host's heartbeats and records in the order they were stored);
// otherwise it says it does not follow them: no host is judged silent,
// and pairs are judged on the stream's clock alone.
func (in *instance) followHeartbeats(ctx context.Context, streams map[string][]string) {
	hs, err := streamsOf(ctx, in.js, []string{heartbeatFilter})
	if err == nil && len(streams) == 1 {
		for name := range hs {
			if _, ok := streams[name]; ok {
				streams[name] = append(streams[name], heartbeatFilter)
				return
			}
		}
	}
	in.log.Warn("hosts' heartbeats not followed: they are not in the one stream of this instance's records", "subject", heartbeatFilter, "err", err)
}

// take applies one message: a heartbeat, or a record bound to its
// subject (trust.go: a host speaks only for its own ends).
func (in *instance) take(m jetstream.Msg, stored, now time.Time) {
	r := Received{Subject: m.Subject(), Stored: stored, Data: m.Data()}
	if isHeartbeat(r.Subject) {
		in.engine.TakeHeartbeat(r, now)
		return
	}
	_, why := in.engine.Take(r, now)
	switch why {
	case "":
		in.m.records.Inc()
		if !stored.IsZero() {
			in.m.lagSeconds.Set(max(0, now.Sub(stored).Seconds()))
		}
	case refusedUndecodable.String():
		in.m.badRecords.Inc()
	}
}

// emit writes a finding line out and to the findings stream.
func (in *instance) emit(l Line) {
	l.Logged = time.Now().UTC()
	b, err := json.Marshal(escape.Value(l))
	if err != nil {
		return
	}
	in.m.findings.WithLabelValues(string(l.Kind), l.Type).Inc()
	line := append(b, '\n')
	for _, w := range in.out {
		w.Write(line)
	}
	_, err = in.js.PublishMsgAsync(&nats.Msg{Subject: fleetFindingSubject(l.Partition), Data: b,
		Header: nats.Header{jetstream.MsgIDHeader: []string{fmt.Sprintf("fleet-%d", l.ID)}}})
	if err != nil {
		in.m.publishErrors.Inc()
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

// reloadOn has srv read its auth file again at each signal, logging what
// came of it, until ctx is done; without an embedded server or its --auth
// a signal only says so.
func reloadOn(ctx context.Context, sig <-chan os.Signal, srv *Embedded, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if srv == nil || srv.cfg.AuthFile == "" {
				log.Info("embedded nats: no --auth file to reload")
				continue
			}
			if err := srv.Reload(); err != nil {
				log.Error("embedded nats: the users were not reloaded", "err", err)
				continue
			}
			log.Info("embedded nats: users reloaded", "auth", srv.cfg.AuthFile)
		}
	}
}
