package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/audit"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/spf13/pflag"
)

// natsFlags are the NATS client options, named as the nats CLI names them.
func addNATSFlags(fl *pflag.FlagSet, o *natsconn.NATSOptions) {
	fl.StringVar(&o.Creds, "nats-creds", "", "NATS credentials file (user JWT and NKey seed)")
	fl.StringVar(&o.User, "nats-user", "", "NATS user name (with --nats-password-file)")
	fl.StringVar(&o.PasswordFile, "nats-password-file", "", "file holding the NATS user's password on one line, mode 0600 (never put it in the URL)")
	fl.StringVar(&o.NKeyFile, "nats-nkey", "", "file holding a NATS user NKey seed, mode 0600 (apmwatch fleet add-host writes one)")
	fl.StringVar(&o.InboxPrefix, "nats-inbox-prefix", "", "receive NATS replies under this prefix (default _INBOX; a host user of apmwatch fleet add-host: _INBOX_HOST)")
	fl.StringVar(&o.TLSCA, "nats-tls-ca", "", "CA certificates to verify the NATS server with")
	fl.StringVar(&o.TLSCert, "nats-tls-cert", "", "client certificate for NATS (with --nats-tls-key)")
	fl.StringVar(&o.TLSKey, "nats-tls-key", "", "client certificate's key")
}

// checkNATSURL accepts nats://, tls://, ws:// and wss:// URLs,
// comma-separated, without credentials: a URL is logged and written to
// ready files, so a password or token in it is refused (and not repeated).
func checkNATSURL(flag, u string) error {
	if natsconn.URLHasCredentials(u) {
		return fmt.Errorf("%s holds credentials in its URL, which is logged and written to ready files: give --nats-user and --nats-password-file, --nats-nkey or --nats-creds", flag)
	}
	for _, one := range strings.Split(u, ",") {
		if !strings.Contains(one, "://") {
			return fmt.Errorf("bad %s %q: want nats://host:port", flag, u)
		}
	}
	return nil
}

// publishFlags are audit's --publish options.
type publishFlags struct {
	url      string
	nats     natsconn.NATSOptions
	queue    string
	queueMax int64
	beat     time.Duration
}

func (p *publishFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&p.url, "publish", "", "publish finding lines and connection records to NATS JetStream at this URL (nats://host:4222)")
	fl.StringVar(&p.queue, "publish-queue", "", "keep what NATS has not acknowledged in this directory (default: publish-queue under RECORDER-DIR, else under /var/lib/apmwatch as root, or under ~/.local/state/apmwatch)")
	fl.Int64Var(&p.queueMax, "publish-queue-max-bytes", publish.DefaultQueueMax, "bound the publish queue; past it the oldest records go (counted)")
	fl.DurationVar(&p.beat, "publish-heartbeat", wire.DefaultHeartbeatEvery, "send this host's heartbeat to the fleet this often (at least 1s)")
	addNATSFlags(fl, &p.nats)
}

// stateDir is apmwatch's state directory: root's, or the user's.
var stateDir = func() (string, error) {
	if os.Geteuid() == 0 {
		return "/var/lib/apmwatch", nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "apmwatch"), nil
}

// defaultQueue is the publish queue's directory without --publish-queue
// or --recorder-dir: publish-queue under the state directory. The queue
// checks it is this user's and writable by no one else.
func defaultQueue() (string, error) {
	d, err := stateDir()
	if err != nil {
		return "STATE-DIR/publish-queue", err
	}
	return filepath.Join(d, "publish-queue"), outfile.MkdirAll(d)
}

// start opens the publisher, or returns nil without --publish.
func (p *publishFlags) start(cfg audit.Config, stderr io.Writer) (*publish.Publisher, error) {
	if p.url == "" {
		if p.queue != "" {
			return nil, usageError{errors.New("--publish-queue needs --publish")}
		}
		return nil, nil
	}
	if err := checkNATSURL("--publish", p.url); err != nil {
		return nil, usageError{err}
	}
	if err := p.nats.Validate(); err != nil {
		return nil, usageError{err}
	}
	if p.queueMax < publish.MinQueueMax {
		return nil, usageError{fmt.Errorf("--publish-queue-max-bytes must be at least %d: %d", publish.MinQueueMax, p.queueMax)}
	}
	if p.beat != 0 && p.beat < time.Second { // 0: the default
		return nil, usageError{fmt.Errorf("--publish-heartbeat must be at least 1s: %v", p.beat)}
	}
	dir := p.queue
	if dir == "" && cfg.RecorderDir != "" {
		dir = filepath.Join(cfg.RecorderDir, "publish-queue")
	}
	if dir == "" {
		d, err := defaultQueue()
		if err != nil {
			return nil, usageError{fmt.Errorf("--publish needs --publish-queue DIR for its on-disk queue: the default %s cannot be made: %v", d, err)}
		}
		dir = d
	}
	host := cfg.Host
	if host == "" {
		host, _ = os.Hostname()
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	o := p.nats
	o.URL, o.Log = p.url, log // the log says once what the server denies
	pub, err := publish.NewPublisher(publish.PublishConfig{NATS: o, Host: host, QueueDir: dir, QueueMax: p.queueMax, Device: cfg.Device,
		Log: log, HeartbeatEvery: p.beat})
	if err != nil {
		return nil, err
	}
	return pub, nil
}
