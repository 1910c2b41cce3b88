package natsconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// NATSOptions are how a client reaches NATS, the options NATS users know
// from the nats CLI: a credentials file (JWT and NKey seed), an NKey seed,
// a user and a password file, and TLS with a CA and a client certificate.
// Secrets come from files only: never the URL, which is logged and
// written to ready files.
type NATSOptions struct {
	URL          string
	Creds        string // --nats-creds
	User         string // --nats-user
	PasswordFile string // --nats-password-file: the password, never in the URL or a flag
	NKeyFile     string // --nats-nkey: a user NKey seed
	InboxPrefix  string // --nats-inbox-prefix: where replies come (its permissions may allow only its own)
	TLSCA        string // --nats-tls-ca
	TLSCert      string // --nats-tls-cert
	TLSKey       string // --nats-tls-key
	Name         string // the connection's name, shown by the server
	// Log, when set, says once per subject what the server denied.
	Log *slog.Logger

	InProcess nats.InProcessConnProvider // the embedded server, reached without a socket
	Internal  nkeys.KeyPair              // the embedded fleet's own user
}

// Validate checks the options.
func (o NATSOptions) Validate() error {
	if URLHasCredentials(o.URL) {
		return errors.New("the nats URL holds credentials, which would be logged and written to ready files: give --nats-user and --nats-password-file, --nats-nkey or --nats-creds")
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if (o.User == "") != (o.PasswordFile == "") {
		return errors.New("--nats-user and --nats-password-file go together")
	}
	n := 0
	for _, s := range []string{o.Creds, o.User, o.NKeyFile} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return errors.New("give one of --nats-creds, --nats-nkey and --nats-user")
	}
	if o.InboxPrefix != "" && !validInboxPrefix(o.InboxPrefix) {
		return fmt.Errorf("bad --nats-inbox-prefix %q: want subject tokens of letters, digits, '-' and '_' joined by dots, no wildcard", escape.Text(o.InboxPrefix))
	}
	return nil
}

// validInboxPrefix: one or more literal subject tokens.
func validInboxPrefix(p string) bool {
	if len(p) > 128 {
		return false
	}
	for _, t := range strings.Split(p, ".") {
		if t == "" || strings.Trim(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_$") != "" {
			return false
		}
	}
	return true
}

// URLHasCredentials reports whether a NATS URL list carries a user, a
// password or a token in any of its URLs (user:password@host, token@host).
func URLHasCredentials(urls string) bool {
	for _, one := range strings.Split(urls, ",") {
		one = strings.TrimSpace(one)
		if _, rest, ok := strings.Cut(one, "://"); ok {
			one = rest
		}
		if i := strings.IndexAny(one, "/?#"); i >= 0 {
			one = one[:i]
		}
		if strings.Contains(one, "@") {
			return true
		}
	}
	return false
}

// maxSecretFile bounds a password or seed file.
const maxSecretFile = 4096

// readSecret reads a secret file: at most 4 KiB, readable by its owner
// only (like an ssh key), so that the secret is in no URL, flag, log or
// ready file. what names it in errors ("nats password file").
func readSecret(path, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the %s: %w", what, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s %s is readable or writable by others (%v): chmod 600 it", what, path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading the %s: %w", what, err)
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("%s %s is longer than %d bytes", what, path, maxSecretFile)
	}
	return b, nil
}

// password reads the password file: one line, at most 4 KiB, readable by
// its owner only.
func (o NATSOptions) password() (string, error) {
	b, err := readSecret(o.PasswordFile, "nats password file")
	if err != nil {
		return "", err
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return "", fmt.Errorf("nats password file %s must hold one non-empty line", o.PasswordFile)
	}
	return pw, nil
}

// nkey reads the NKey seed file (as `apmwatch fleet add-host` or `nk
// -gen user` write it: the seed on a line, or a decorated block):
// checked as the password file is.
func (o NATSOptions) nkey() (nkeys.KeyPair, error) {
	b, err := readSecret(o.NKeyFile, "nats nkey file")
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		// the error of nkeys says what is wrong, never the seed
		return nil, fmt.Errorf("nats nkey file %s holds no user seed: %w", o.NKeyFile, err)
	}
	return kp, nil
}

// Connect dials NATS. With retry it returns at once even when NATS is
// down, and keeps reconnecting for ever (the publisher's queue waits).
// Without it (fleet status, postmortem --nats: readers of several filter
// subjects at once) a server older than 2.10 is refused.
func (o NATSOptions) Connect(retry bool) (*nats.Conn, error) {
	if URLHasCredentials(o.URL) {
		return nil, errors.New("the nats URL holds credentials: give them in files (--nats-user and --nats-password-file, --nats-nkey, --nats-creds)")
	}
	d := newDenials(o.Log, o.InboxPrefix)
	opts := []nats.Option{nats.Name(o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second),
		nats.ErrorHandler(d.handler), nats.ReconnectHandler(d.reconnected),
		nats.ClosedHandler(func(nc *nats.Conn) { connDenials.Delete(nc) })}
	if retry {
		opts = append(opts, nats.RetryOnFailedConnect(true))
	}
	if o.InProcess != nil {
		opts = append(opts, nats.InProcessServer(o.InProcess))
	}
	if o.Internal != nil {
		pub, err := o.Internal.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("the embedded fleet's key: %w", err)
		}
		opts = append(opts, nats.Nkey(pub, o.Internal.Sign))
	}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.User != "" {
		pw, err := o.password()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserInfo(o.User, pw))
	}
	if o.NKeyFile != "" {
		kp, err := o.nkey()
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("nats nkey file %s: %w", o.NKeyFile, err)
		}
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to nats %s: %w", o.URL, err)
	}
	connDenials.Store(nc, d)
	if nc.IsClosed() { // closed before it was registered
		connDenials.Delete(nc)
	}
	if !retry {
		if err := CheckServerVersion(nc.ConnectedServerVersion(), o.Name); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return nc, nil
}

// CheckServerVersion refuses a server older than 2.10: its consumers take
// one filter subject, and one given several would silently deliver every
// subject (every partition to every instance). v is the server's INFO
// (hostile: escaped); "" (not connected yet) passes.
func CheckServerVersion(v, who string) error {
	if v == "" {
		return nil
	}
	major, minor, ok := serverVersion(v)
	if ok && (major > 2 || major == 2 && minor >= 10) {
		return nil
	}
	if who == "" {
		who = "apmwatch"
	}
	if len(v) > 40 {
		v = v[:40]
	}
	return fmt.Errorf("nats-server %s: %s needs 2.10 or later for consumers with several filter subjects (a fleet instance reads its partitions through one)", escape.Text(v), who)
}

// serverVersion parses "2.10.22" (and "v2.10.22-beta.1").
func serverVersion(v string) (major, minor int, ok bool) {
	f := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(f) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(f[0])
	minor, err2 := strconv.Atoi(strings.SplitN(f[1], "-", 2)[0])
	return major, minor, err1 == nil && err2 == nil
}

// StreamLimits size the streams when apmwatch creates them (docs/fleet.md:
// an operator may create them beforehand with other limits; apmwatch
// never changes an existing stream).
type StreamLimits struct {
	Replicas       int
	ConnMaxAge     time.Duration
	ConnPerSubject int64 // revisions kept per end
	FindingsMaxAge time.Duration
	MaxBytes       int64 // each stream's; -1: none
}

// DefaultLimits are the limits of streams apmwatch creates.
var DefaultLimits = StreamLimits{Replicas: 1, ConnMaxAge: 7 * 24 * time.Hour, ConnPerSubject: 8,
	FindingsMaxAge: 30 * 24 * time.Hour, MaxBytes: -1}

// minStreamBytes is the smallest --stream-max-bytes: a few records'
// worth would drop ends as fast as they come.
const minStreamBytes = 1 << 20

// Validate reports the first bad limit in one line, named by its flag.
func (l StreamLimits) Validate() error {
	switch {
	case l.Replicas < 1 || l.Replicas > 5:
		return fmt.Errorf("--stream-replicas must be 1 to 5: %d", l.Replicas)
	case l.MaxBytes != -1 && l.MaxBytes < minStreamBytes:
		return fmt.Errorf("--stream-max-bytes must be -1 (none) or at least %d: %d", minStreamBytes, l.MaxBytes)
	case l.ConnMaxAge <= 0:
		return fmt.Errorf("--stream-max-age must be positive: %v", l.ConnMaxAge)
	case l.FindingsMaxAge <= 0:
		return fmt.Errorf("--findings-max-age must be positive: %v", l.FindingsMaxAge)
	case l.ConnPerSubject < 1:
		return fmt.Errorf("--stream-max-msgs-per-subject must be at least 1: %d", l.ConnPerSubject)
	}
	return nil
}

// ErrCreateStreams says that the streams must exist before apmwatch runs:
// the account denies creating them or requires limits apmwatch was not
// given. It is not a wait: asking again gives the same answer.
var ErrCreateStreams = errors.New("create the streams first")

// errJetStreamDisabled: the user's account has no JetStream.
var ErrJetStreamDisabled = errors.New("jetstream is not enabled for this user's account")

// EnsureStreams creates the two streams unless they exist, or unless an
// operator's streams already take their subjects (the connection records
// may be split over several streams by partition: docs/fleet.md). An
// account that refuses them (permissions, required limits) is an
// ErrCreateStreams naming the streams missing, at once.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, l StreamLimits) error {
	ctx, done := Guard(ctx, js.Conn())
	defer done()
	cfgs := []jetstream.StreamConfig{
		{Name: wire.ConnStream, Subjects: []string{wire.ConnPrefix + ">"}, Storage: jetstream.FileStorage, Replicas: l.Replicas,
			MaxAge: l.ConnMaxAge, MaxMsgsPerSubject: l.ConnPerSubject, MaxBytes: l.MaxBytes, Duplicates: 10 * time.Minute,
			Description: "apmwatch connection records: one end of an RC/UC connection per subject"},
		{Name: wire.FindingsStream, Subjects: []string{"apmwatch.finding.>"}, Storage: jetstream.FileStorage, Replicas: l.Replicas,
			MaxAge: l.FindingsMaxAge, MaxBytes: l.MaxBytes, Duplicates: 10 * time.Minute,
			Description: "apmwatch finding lines: hosts' and the fleet's"},
	}
	probe := []string{wire.ConnPrefix + "0.x", wire.FleetFindingSubject(0)}
	var missing []jetstream.StreamConfig
	for i, c := range cfgs {
		if _, err := js.StreamNameBySubject(ctx, probe[i]); err == nil {
			continue
		} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("looking up the stream of %s: %w", probe[i], Denied(ctx, err))
		}
		missing = append(missing, c)
	}
	for i, c := range missing {
		_, err := js.CreateStream(ctx, c)
		if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			continue
		}
		err = Denied(ctx, err)
		var names []string
		for _, m := range missing[i:] {
			names = append(names, m.Name)
		}
		var d *DeniedError
		var api *jetstream.APIError
		switch {
		case errors.As(err, &d):
			return fmt.Errorf("%w (%s: docs/fleet.md, Streams): this user may not create them: %v", ErrCreateStreams, strings.Join(names, ", "), err)
		case errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeJetStreamNotEnabledForAccount:
			return fmt.Errorf("creating stream %s: %w", c.Name, ErrJetStreamDisabled)
		case errors.As(err, &api) && streamRefused(api):
			return fmt.Errorf("%w (%s: docs/fleet.md, Streams), or give the limits the account requires: nats refused stream %s: %s",
				ErrCreateStreams, strings.Join(names, ", "), c.Name, escape.Text(api.Description))
		}
		return fmt.Errorf("creating stream %s: %w", c.Name, err)
	}
	return nil
}

// streamRefused tells the server's answers that creating the stream again
// would repeat (the account's limits, a configuration it cannot hold)
// from passing ones (no leader yet, resources a peer will bring back).
func streamRefused(e *jetstream.APIError) bool {
	switch e.ErrorCode {
	case 10028, 10047, 10053, 10074: // memory, storage, limits, replicas
		return true
	}
	return e.Code == 400
}

// StreamsOf groups subject filters by the stream that holds them.
func StreamsOf(ctx context.Context, js jetstream.JetStream, filters []string) (map[string][]string, error) {
	ctx, done := Guard(ctx, js.Conn())
	defer done()
	out := map[string][]string{}
	for _, f := range filters {
		name, err := js.StreamNameBySubject(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("the stream of %s: %w", f, Denied(ctx, err))
		}
		out[name] = append(out[name], f)
	}
	return out, nil
}
