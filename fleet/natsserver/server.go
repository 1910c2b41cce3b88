package natsserver

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// DefaultListen is where `apmwatch fleet` with no --nats serves its
// embedded NATS (a contract: scripts publish to nats://127.0.0.1:4222).
const DefaultListen = "127.0.0.1:4222"

// ServerConfig is the embedded NATS server's: where it listens and keeps
// its streams, who may connect and how.
type ServerConfig struct {
	Listen   string // host:port; port 0 picks one
	StoreDir string // the JetStream store
	// AuthFile holds its users (NATS configuration: accounts and
	// authorization, as `apmwatch fleet add-host` writes it). Without
	// it only a loopback Listen is allowed, and a client without
	// credentials may publish and read apmwatch's subjects but not
	// administer JetStream (delete or create streams).
	AuthFile  string
	TLSCert   string // serve TLS with this certificate
	TLSKey    string
	TLSCA     string // verify client certificates with these CAs, when given
	TLSVerify bool   // and require one
	Monitor   string // NATS monitoring over HTTP here ("": none; "PORT" or ":PORT": loopback)
	// Open gives a client without credentials every permission, as
	// before there were users: tests' servers only.
	Open bool
}

// Validate reports the first bad option in one line, named by its flag.
func (c ServerConfig) Validate() error {
	host, _, err := splitListen(c.Listen)
	if err != nil {
		return err
	}
	if c.AuthFile == "" && !c.Open && !isLoopback(host) {
		return fmt.Errorf("--listen %s is not a loopback address: give --auth FILE (apmwatch fleet add-host writes it) so that only your hosts publish", c.Listen)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.TLSCert == "" && (c.TLSCA != "" || c.TLSVerify) {
		return errors.New("--tls-ca and --tls-verify need --tls-cert and --tls-key")
	}
	if c.TLSVerify && c.TLSCA == "" {
		return errors.New("--tls-verify needs --tls-ca, the CAs of the client certificates")
	}
	if c.Monitor != "" {
		if _, _, err := monitorAddr(c.Monitor); err != nil {
			return err
		}
	}
	return nil
}

func splitListen(listen string) (string, int, error) {
	host, ps, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("bad --listen %q: want host:port", listen)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad --listen %q: want host:port", listen)
	}
	return host, port, nil
}

// isLoopback: an address only this machine reaches ("" and 0.0.0.0 are
// every address; a name could resolve to anything but localhost).
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// monitorAddr parses --monitor: "PORT" or ":PORT" listen on loopback.
func monitorAddr(a string) (string, int, error) {
	if !strings.Contains(a, ":") {
		a = ":" + a
	}
	host, ps, err := net.SplitHostPort(a)
	port, perr := strconv.Atoi(ps)
	if err != nil || perr != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad --monitor %q: want host:port or port", a)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// Embedded is a NATS server with JetStream inside the process: the
// single-machine default of `apmwatch fleet`, and the tests' server.
type Embedded struct {
	s *server.Server
	// internal is the fleet instance's own user (fleet permissions), an
	// NKey that never leaves the process; nil on an open server.
	internal nkeys.KeyPair
	Config   ServerConfig
}

// StartEmbedded serves NATS with JetStream on listen (host:port; port 0
// picks one), storing streams under dir, to anyone who connects: the
// tests' server and programs of their own (`apmwatch fleet` uses
// StartServer, which is not open).
func StartEmbedded(listen, dir string) (*Embedded, error) {
	return StartServer(ServerConfig{Listen: listen, StoreDir: dir, Open: true})
}

// StartServer serves NATS with JetStream as c says.
func StartServer(c ServerConfig) (*Embedded, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	host, port, _ := splitListen(c.Listen)
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if err := outfile.MkdirAll(c.StoreDir); err != nil {
		return nil, fmt.Errorf("nats store: %w", err)
	}
	// The streams are what the fleet judges: a store another local user
	// made first (the default falls back to a fixed path under the
	// temporary directory) or can write to is refused.
	if err := outfile.OwnDir(c.StoreDir); err != nil {
		return nil, fmt.Errorf("nats store: %w", err)
	}
	e := &Embedded{Config: c}
	if !c.Open {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("embedded nats: the fleet's key: %w", err)
		}
		e.internal = kp
	}
	opts, account, err := e.options(host, port)
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %s", oneLine(err.Error()))
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats: not serving on %s after 10s (address in use?)", c.Listen)
	}
	if account != "" {
		if acc, err := s.LookupAccount(account); err != nil || !acc.JetStreamEnabled() {
			s.Shutdown()
			return nil, fmt.Errorf("--auth %s: account %s needs jetstream: enabled", c.AuthFile, account)
		}
	}
	e.s = s
	return e, nil
}

// options are the server's options as its configuration (and its auth
// file, read now) say, the fleet's own key among the users.
func (e *Embedded) options(host string, port int) (*server.Options, string, error) {
	c := e.Config
	opts := &server.Options{}
	var account string
	if c.AuthFile != "" {
		a, err := LoadAuth(c.AuthFile)
		if err != nil {
			return nil, "", err
		}
		opts, account = a.opts, a.account
	}
	opts.ServerName, opts.Host, opts.Port = "apmwatch-fleet", host, port
	opts.JetStream, opts.StoreDir = true, c.StoreDir
	opts.NoSigs, opts.NoLog, opts.MaxPayload = true, true, 1<<20
	if e.internal != nil {
		pub, _ := e.internal.PublicKey()
		var acc *server.Account
		for _, a := range opts.Accounts {
			if a.Name == account {
				acc = a
			}
		}
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: pub, Permissions: fleetPermissions(), Account: acc,
			AllowedConnectionTypes: map[string]struct{}{"IN_PROCESS": {}}})
	}
	if c.AuthFile == "" && !c.Open {
		// No users: whoever connects without credentials (loopback
		// only) is "local", who publishes and reads apmwatch's subjects
		// and administers nothing. Its password is never used nor kept.
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, "", fmt.Errorf("embedded nats: %w", err)
		}
		opts.Users = append(opts.Users, &server.User{Username: localUser, Password: hex.EncodeToString(b), Permissions: localPermissions()})
		opts.NoAuthUser = localUser
	}
	if c.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: c.TLSCert, KeyFile: c.TLSKey, CaFile: c.TLSCA, Verify: c.TLSVerify})
		if err != nil {
			return nil, "", fmt.Errorf("embedded nats tls: %s", oneLine(err.Error()))
		}
		if c.TLSCA != "" && !c.TLSVerify {
			tc.ClientAuth = tls.VerifyClientCertIfGiven
		}
		opts.TLS, opts.TLSConfig, opts.TLSVerify, opts.TLSTimeout = true, tc, c.TLSVerify, 2
	}
	if c.Monitor != "" {
		opts.HTTPHost, opts.HTTPPort, _ = monitorAddr(c.Monitor)
	}
	return opts, account, nil
}

// Reload reads the auth file again and gives the running server its users
// (SIGHUP: `apmwatch fleet add-host` added one); a file that does not load
// leaves the server as it was.
func (e *Embedded) Reload() error {
	if e.Config.AuthFile == "" {
		return errors.New("no --auth file to reload")
	}
	host, port, _ := splitListen(e.Config.Listen)
	if port == 0 {
		port = e.s.Addr().(*net.TCPAddr).Port
	}
	opts, _, err := e.options(host, port)
	if err != nil {
		return err
	}
	if err := e.s.ReloadOptions(opts); err != nil {
		return fmt.Errorf("reloading --auth %s: %s", e.Config.AuthFile, oneLine(err.Error()))
	}
	return nil
}

// localUser is who connects without credentials to a server with no
// --auth.
const localUser = "local"

// URL is the client URL.
func (e *Embedded) URL() string { return e.s.ClientURL() }

// MonitorURL is the monitoring server's (http://host:port), or "".
func (e *Embedded) MonitorURL() string {
	if a := e.s.MonitorAddr(); a != nil {
		return "http://" + a.String()
	}
	return ""
}

// ClientOptions reach the server from this process: without a socket
// (so without TLS: the server offers it, the client declines), as the
// fleet's own user.
func (e *Embedded) ClientOptions() natsconn.NATSOptions {
	return natsconn.NATSOptions{URL: strings.Replace(e.URL(), "tls://", "nats://", 1), InProcess: e.s, Internal: e.internal}
}

// Shutdown stops the server.
func (e *Embedded) Shutdown() {
	e.s.Shutdown()
	e.s.WaitForShutdown()
}

// oneLine joins a multi-line error (the server's configuration errors
// come one a line).
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}
