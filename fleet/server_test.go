package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/apmwatch/apmwatch/fleet/publish"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
)

// The embedded server speaks TLS: a client that trusts its CA stores its
// line with or without a client certificate (optional), one that does not
// trust it never connects; with --tls-verify a certificate is required.
// The fleet itself reaches its server in-process, TLS or not.
func TestEmbeddedServesTLS(t *testing.T) {
	dir := t.TempDir()
	fleettest.PKI(t, dir)
	pem := func(n string) string { return filepath.Join(dir, n) }
	cfg := embeddedConfig(t)
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = pem("server.pem"), pem("server-key.pem"), pem("ca.pem")
	f, _ := runFleet(t, cfg)
	url := f.readyInfo(t).NATS
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("ready file's URL %s", url)
	}
	for _, o := range []natsconn.NATSOptions{{URL: url, TLSCA: pem("ca.pem")},
		{URL: url, TLSCA: pem("ca.pem"), TLSCert: pem("client.pem"), TLSKey: pem("client-key.pem")}} {
		p, err := publish.NewPublisher(publish.PublishConfig{NATS: o, Host: "hostA", QueueDir: filepath.Join(t.TempDir(), "q")})
		if err != nil {
			t.Fatal(err)
		}
		p.Line(findingline.New(apm.Finding{ID: 7, Kind: apm.MissedRearm}, "hostA"))
		fleettest.WaitFor(t, 40*time.Second, "the line stored over TLS", func() bool {
			return published(t, p, "apmwatch_publish_queue_messages") == 0 && published(t, p, "apmwatch_published_total") == 1
		})
		p.Close(time.Second)
	}
	if _, err := (natsconn.NATSOptions{URL: url}).Connect(false); err == nil {
		t.Error("a client that does not trust the server's CA connected")
	}

	cfg = embeddedConfig(t)
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA, cfg.TLSVerify = pem("server.pem"), pem("server-key.pem"), pem("ca.pem"), true
	f, _ = runFleet(t, cfg)
	url = f.readyInfo(t).NATS
	if _, err := (natsconn.NATSOptions{URL: url, TLSCA: pem("ca.pem")}).Connect(false); err == nil {
		t.Error("--tls-verify: a client without a certificate connected")
	}
	nc, err := (natsconn.NATSOptions{URL: url, TLSCA: pem("ca.pem"), TLSCert: pem("client.pem"), TLSKey: pem("client-key.pem")}).Connect(false)
	if err != nil {
		t.Fatalf("--tls-verify with a client certificate: %v", err)
	}
	nc.Close()

	for _, bad := range []Config{{TLSCert: "c"}, {TLSCA: "ca"}, {TLSCert: "c", TLSKey: "k", TLSVerify: true}} {
		c := embeddedConfig(t)
		c.TLSCert, c.TLSKey, c.TLSCA, c.TLSVerify = bad.TLSCert, bad.TLSKey, bad.TLSCA, bad.TLSVerify
		if err := c.Validate(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// writeAuth writes an authorization file (0600) with the given body and
// a host user, so that it has one.
func writeAuth(t *testing.T, body string) string {
	t.Helper()
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	p := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(body, "PUB", pub)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// An account that requires limits apmwatch was not given stops the fleet
// at once, saying to create the streams first and naming them; with
// --stream-max-bytes it starts. A user that may not create streams (a
// host's) stops it at once too.
func TestStreamsTheAccountRefusesFailFast(t *testing.T) {
	auth := writeAuth(t, `accounts { APMWATCH { jetstream { max_file: 1G, max_bytes_required: true }
		users: [ { nkey: "PUB" } ] } }`)
	cfg := embeddedConfig(t)
	cfg.Auth = auth
	start := time.Now()
	err := Run(context.Background(), cfg, &syncBuffer{}, &syncBuffer{})
	if !errors.Is(err, natsconn.ErrCreateStreams) || !strings.Contains(err.Error(), wire.ConnStream) || !strings.Contains(err.Error(), wire.FindingsStream) ||
		!strings.Contains(err.Error(), "max bytes") || strings.Contains(err.Error(), "\n") || time.Since(start) > 10*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	cfg.Limits.MaxBytes = 64 << 20
	runFleet(t, cfg)

	dir := t.TempDir()
	ecfg := embeddedConfig(t)
	ecfg.Auth = fleettest.AddUsers(t, dir)
	srv, err := natsserver.StartServer(ecfg.server())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	cfg = DefaultConfig()
	cfg.NATS = fleettest.HostOpts(srv.URL(), dir, "node17")
	cfg.MetricsAddr = ""
	start = time.Now()
	err = Run(context.Background(), cfg, &syncBuffer{}, &syncBuffer{})
	if !errors.Is(err, natsconn.ErrCreateStreams) || !strings.Contains(err.Error(), "may not create") || time.Since(start) > 10*time.Second {
		t.Fatalf("a fleet as a host: %v after %v", err, time.Since(start))
	}
}

func TestStreamLimitsValidate(t *testing.T) {
	if err := natsconn.DefaultLimits.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(l *natsconn.StreamLimits){
		func(l *natsconn.StreamLimits) { l.Replicas = 0 },
		func(l *natsconn.StreamLimits) { l.Replicas = 6 },
		func(l *natsconn.StreamLimits) { l.MaxBytes = 0 },
		func(l *natsconn.StreamLimits) { l.MaxBytes = 1000 },
		func(l *natsconn.StreamLimits) { l.ConnMaxAge = 0 },
		func(l *natsconn.StreamLimits) { l.FindingsMaxAge = -time.Hour },
		func(l *natsconn.StreamLimits) { l.ConnPerSubject = 0 },
	} {
		l := natsconn.DefaultLimits
		bad(&l)
		if err := l.Validate(); err == nil || !strings.HasPrefix(err.Error(), "--") {
			t.Errorf("%+v: %v", l, err)
		}
	}
}

// oldServer speaks just enough NATS to be connected to, announcing
// version in its INFO (a server older than the fleet needs).
func oldServer(t *testing.T, version string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "INFO {\"server_id\":\"OLD\",\"server_name\":\"old\",\"version\":%q,\"proto\":1,\"headers\":true,\"max_payload\":1048576}\r\n", version)
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(l, "PING") {
						c.Write([]byte("PONG\r\n"))
					}
				}
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

// A server older than 2.10 (Debian bookworm's 2.9.10) cannot serve the
// fleet: its consumers take one filter subject and would give every
// instance every partition. The fleet, fleet status and postmortem
// --nats refuse it at once, naming its version.
func TestServerOlderThan210IsRefused(t *testing.T) {
	url := oldServer(t, "2.9.10")
	cfg := DefaultConfig()
	cfg.NATS.URL, cfg.MetricsAddr = url, ""
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Run(ctx, cfg, &syncBuffer{}, &syncBuffer{})
	if err == nil || !strings.HasPrefix(err.Error(), "nats-server 2.9.10: apmwatch fleet needs 2.10 or later for ") {
		t.Fatalf("fleet: %v", err)
	}
	if _, err := ReadStatus(ctx, natsconn.NATSOptions{URL: url}); err == nil || !strings.Contains(err.Error(), "nats-server 2.9.10: apmwatch fleet status needs 2.10") {
		t.Fatalf("fleet status: %v", err)
	}
	for v, ok := range map[string]bool{"2.10.0": true, "2.12.1-beta.2": true, "v2.11.3": true, "3.0.0": true, "2.9.25": false, "1.4.1": false, "": true} {
		if err := natsconn.CheckServerVersion(v, "x"); (err == nil) != ok {
			t.Errorf("version %q: %v", v, err)
		}
	}
	if err := natsconn.CheckServerVersion("2.9\x1b[2J\nforged", "x"); err == nil || strings.ContainsAny(err.Error(), "\x1b\n") {
		t.Errorf("a hostile version: %q", err)
	}
}

// Credentials come from files only, and no secret reaches a log or a
// ready file: the fleet's log and ready file, and the logs of publishers
// with a password file, with an NKey seed file and with a wrong password,
// hold neither password nor seed. A URL with a password is refused
// without repeating it; a seed file others may read is refused.
func TestNoSecretInLogsOrReadyFiles(t *testing.T) {
	const pw, wrong = "pw-3c1f9a77e2", "wrong-8d02bb41f6"
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.conf")
	os.WriteFile(auth, []byte(`accounts { APMWATCH { jetstream: enabled
		users: [ { user: node17, password: "`+pw+`" }, { nkey: "`+pub+`" } ] } }`), 0o600)
	secret := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pwFile, wrongFile, seedFile := secret("pw", []byte(pw+"\n")), secret("wrong", []byte(wrong+"\n")), secret("node18.nk", append(seed, '\n'))

	cfg := embeddedConfig(t)
	cfg.Auth = auth
	f, fleetLog := runFleet(t, cfg)
	url := f.readyInfo(t).NATS
	logs := map[string]*syncBuffer{"fleet": fleetLog}
	for _, c := range []struct {
		host string
		o    natsconn.NATSOptions
		ok   bool
	}{
		{"node17", natsconn.NATSOptions{URL: url, User: "node17", PasswordFile: pwFile}, true},
		{"node18", natsconn.NATSOptions{URL: url, NKeyFile: seedFile}, true},
		{"node19", natsconn.NATSOptions{URL: url, User: "node17", PasswordFile: wrongFile}, false},
	} {
		log := &syncBuffer{}
		logs[c.host] = log
		p, err := publish.NewPublisher(publish.PublishConfig{NATS: c.o, Host: c.host, QueueDir: filepath.Join(t.TempDir(), "q"), Log: slogTo(log)})
		if err != nil {
			t.Fatal(err)
		}
		p.Line(findingline.New(apm.Finding{ID: 7, Kind: apm.MissedRearm}, c.host))
		if c.ok {
			fleettest.WaitFor(t, 20*time.Second, c.host+"'s line stored", func() bool {
				return published(t, p, "apmwatch_publish_queue_messages") == 0 && published(t, p, "apmwatch_published_total") == 1
			})
		} else {
			time.Sleep(2 * time.Second)
			if published(t, p, "apmwatch_published_total") != 0 {
				t.Errorf("%s sent with a wrong password", c.host)
			}
		}
		p.Close(time.Second)
	}
	ready, _ := os.ReadFile(f.ready)
	logs["ready file"] = &syncBuffer{}
	logs["ready file"].Write(ready)
	for name, b := range logs {
		s := b.text()
		for _, sec := range []string{pw, wrong, string(seed), string(seed[2:20])} {
			if strings.Contains(s, sec) {
				t.Errorf("the %s holds a secret:\n%s", name, s)
			}
		}
	}

	for _, u := range []string{"nats://node17:" + pw + "@127.0.0.1:4222", "nats://127.0.0.1:4222,tls://" + pw + "@n2:4222", "node17:" + pw + "@127.0.0.1:4222"} {
		o := natsconn.NATSOptions{URL: u}
		err := o.Validate()
		if err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "--nats-password-file") {
			t.Errorf("URL with a password: %v", err)
		}
		if _, err := o.Connect(false); err == nil || strings.Contains(err.Error(), pw) {
			t.Errorf("connecting to a URL with a password: %v", err)
		}
	}
	os.Chmod(seedFile, 0o644)
	if _, err := (natsconn.NATSOptions{URL: url, NKeyFile: seedFile}).Connect(false); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a seed file others may read: %v", err)
	}
	junk := secret("junk.nk", []byte("SUnot-a-seed-"+pw+"\n"))
	if _, err := (natsconn.NATSOptions{URL: url, NKeyFile: junk}).Connect(false); err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("a file that is no seed: %v", err)
	}
	for _, o := range []natsconn.NATSOptions{{NKeyFile: "a", Creds: "b"}, {NKeyFile: "a", User: "u", PasswordFile: "p"}, {InboxPrefix: "_INBOX.>"}, {InboxPrefix: "a..b"}, {InboxPrefix: "a b"}} {
		if err := o.Validate(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// --auth takes users and their permissions only: a file with anything
// else (a listen address, an include), a single user or token, a user
// for clients without credentials, no user, or users in an account not
// named APMWATCH is refused in one line; users without accounts go to
// the global account, where the fleet runs too.
func TestAuthFileTakesUsersOnly(t *testing.T) {
	for body, want := range map[string]string{
		`listen: 0.0.0.0:4222
		 accounts { APMWATCH { jetstream: enabled, users: [ { nkey: "PUB" } ] } }`: "only accounts and authorization",
		`include other.conf`:                     "include",
		`authorization { user: a, password: b }`: "single user",
		`authorization { token: "s3cret" }`:      "single user",
		`accounts { APMWATCH { jetstream: enabled, users: [ { nkey: "PUB" }, { user: a, password: b } ] } }
		 no_auth_user: a`: "no_auth_user",
		`accounts { APMWATCH { jetstream: enabled } }`:                                 "no users",
		`accounts { OTHER { jetstream: enabled, users: [ { nkey: "PUB" } ] } }`:        "named APMWATCH",
		`accounts { APMWATCH { jetstream: enabled, users: [ { nkey: "NOTAKEY" } ] } }`: "",
	} {
		_, err := natsserver.LoadAuth(writeAuth(t, body))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	cfg := embeddedConfig(t)
	cfg.Auth = writeAuth(t, `authorization { users: [ { nkey: "PUB" } ] }`)
	runFleet(t, cfg)
	cfg = embeddedConfig(t)
	cfg.Auth = writeAuth(t, `accounts { APMWATCH { users: [ { nkey: "PUB" } ] } }`)
	if err := Run(context.Background(), cfg, &syncBuffer{}, &syncBuffer{}); err == nil || !strings.Contains(err.Error(), "jetstream: enabled") {
		t.Errorf("an APMWATCH account without jetstream: %v", err)
	}
}

// published reads one of a publisher's metrics (a counter or a gauge
// without labels) through its prometheus.Collector.
func published(t *testing.T, p *publish.Publisher, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		if m := mf.GetMetric()[0]; m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		} else if m.GetGauge() != nil {
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("the publisher has no metric %s", name)
	return 0
}
