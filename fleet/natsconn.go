package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSOptions are how a client reaches NATS, the options NATS users know
// from the nats CLI: a credentials file (JWT and NKey seed), and TLS with
// a CA and a client certificate.
type NATSOptions struct {
	URL          string
	Creds        string // --nats-creds
	User         string // --nats-user
	PasswordFile string // --nats-password-file: the password, never in the URL or a flag
	TLSCA        string // --nats-tls-ca
	TLSCert      string // --nats-tls-cert
	TLSKey       string // --nats-tls-key
	Name         string // the connection's name, shown by the server
}

// Validate checks the options.
func (o NATSOptions) Validate() error {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if (o.User == "") != (o.PasswordFile == "") {
		return errors.New("--nats-user and --nats-password-file go together")
	}
	return nil
}

// maxPasswordFile bounds a password file.
const maxPasswordFile = 4096

// password reads the password file: one line, at most 4 KiB, readable by
// its owner only (like an ssh key), so that the password is in no URL,
// flag, log or ready file.
func (o NATSOptions) password() (string, error) {
	f, err := os.Open(o.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("reading the nats password file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading the nats password file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("nats password file %s is readable or writable by others (%v): chmod 600 it", o.PasswordFile, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return "", fmt.Errorf("reading the nats password file: %w", err)
	}
	if len(b) > maxPasswordFile {
		return "", fmt.Errorf("nats password file %s is longer than %d bytes", o.PasswordFile, maxPasswordFile)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return "", fmt.Errorf("nats password file %s must hold one non-empty line", o.PasswordFile)
	}
	return pw, nil
}

// connect dials NATS. With retry it returns at once even when NATS is
// down, and keeps reconnecting for ever (the publisher's queue waits).
func (o NATSOptions) connect(retry bool) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second)}
	if retry {
		opts = append(opts, nats.RetryOnFailedConnect(true))
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
	return nc, nil
}

// StreamLimits size the streams when apmwatch creates them (docs/fleet.md:
// an operator may create them beforehand with other limits; apmwatch
// never changes an existing stream).
type StreamLimits struct {
	Replicas       int
	ConnMaxAge     time.Duration
	ConnPerSubject int64 // revisions kept per end
	FindingsMaxAge time.Duration
	MaxBytes       int64
}

// DefaultLimits are the limits of streams apmwatch creates.
var DefaultLimits = StreamLimits{Replicas: 1, ConnMaxAge: 7 * 24 * time.Hour, ConnPerSubject: 8,
	FindingsMaxAge: 30 * 24 * time.Hour, MaxBytes: -1}

// ensureStreams creates the two streams unless they exist, or unless an
// operator's streams already take their subjects (the connection records
// may be split over several streams by partition: docs/fleet.md).
func ensureStreams(ctx context.Context, js jetstream.JetStream, l StreamLimits) error {
	cfgs := []jetstream.StreamConfig{
		{Name: ConnStream, Subjects: []string{connPrefix + ">"}, Storage: jetstream.FileStorage, Replicas: l.Replicas,
			MaxAge: l.ConnMaxAge, MaxMsgsPerSubject: l.ConnPerSubject, MaxBytes: l.MaxBytes, Duplicates: 10 * time.Minute,
			Description: "apmwatch connection records: one end of an RC/UC connection per subject"},
		{Name: FindingsStream, Subjects: []string{"apmwatch.finding.>"}, Storage: jetstream.FileStorage, Replicas: l.Replicas,
			MaxAge: l.FindingsMaxAge, MaxBytes: l.MaxBytes, Duplicates: 10 * time.Minute,
			Description: "apmwatch finding lines: hosts' and the fleet's"},
	}
	probe := []string{connPrefix + "0.x", fleetFindingSubject(0)}
	for i, c := range cfgs {
		if _, err := js.StreamNameBySubject(ctx, probe[i]); err == nil {
			continue
		} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("looking up the stream of %s: %w", probe[i], err)
		}
		if _, err := js.CreateStream(ctx, c); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("creating stream %s: %w", c.Name, err)
		}
	}
	return nil
}

// streamsOf groups subject filters by the stream that holds them.
func streamsOf(ctx context.Context, js jetstream.JetStream, filters []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, f := range filters {
		name, err := js.StreamNameBySubject(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("the stream of %s: %w", f, err)
		}
		out[name] = append(out[name], f)
	}
	return out, nil
}
