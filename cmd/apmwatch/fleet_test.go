package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/audit"
	"github.com/apmwatch/apmwatch/fleet"
	"github.com/apmwatch/apmwatch/fleet/publish"
)

// Wrong fleet and publish options are one-line usage errors (exit 2),
// before anything is started.
func TestFleetAndPublishUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"audit", "--publish", "localhost:4222", "--publish-queue", "/tmp/q"},
		{"audit", "--publish-queue", "/tmp/q"},
		{"audit", "--publish", "nats://127.0.0.1:1", "--publish-queue", "/tmp/q", "--publish-queue-max-bytes", "1000"},
		{"audit", "--publish", "nats://127.0.0.1:1", "--publish-queue", "/tmp/q", "--nats-tls-cert", "c.pem"},
		{"fleet", "--instances", "0"},
		{"fleet", "--instance", "2", "--instances", "2"},
		{"fleet", "--nats", "127.0.0.1:4222"},
		{"fleet", "--rearm-deadline", "0s", "--store", "/tmp/s"},
		{"fleet", "--lease-ttl", "10ms", "--store", "/tmp/s"},
		{"fleet", "--lease-ttl", "2h", "--store", "/tmp/s"},
		{"fleet", "--silent-after", "-1s", "--store", "/tmp/s"},
		{"fleet", "status", "--silent-after", "0s"},
		{"audit", "--publish", "nats://127.0.0.1:1", "--publish-queue", "/tmp/q", "--publish-heartbeat", "10ms"},
		{"fleet", "status", "--nats", "nowhere"},
		{"fleet", "status", "-o", "yaml"},
		{"fleet", "--listen", "0.0.0.0:4222", "--store", "/tmp/s"},
		{"fleet", "--listen", ":4222", "--store", "/tmp/s"},
		{"fleet", "--nats", "nats://127.0.0.1:1", "--auth", "auth.conf"},
		{"fleet", "--nats", "nats://127.0.0.1:1", "--monitor", "8222"},
		{"fleet", "--store", "/tmp/s", "--tls-cert", "c.pem"},
		{"fleet", "--store", "/tmp/s", "--tls-ca", "ca.pem"},
		{"fleet", "--store", "/tmp/s", "--monitor", "nowhere:x"},
		{"fleet", "--store", "/tmp/s", "--stream-replicas", "0"},
		{"fleet", "--store", "/tmp/s", "--stream-max-bytes", "1000"},
		{"fleet", "--store", "/tmp/s", "--stream-max-msgs-per-subject", "0"},
		{"fleet", "add-host", "node17"},
		{"fleet", "add-host", "--auth", "auth.conf"},
		{"audit", "--publish", "nats://127.0.0.1:1", "--publish-queue", "/tmp/q", "--nats-nkey", "a.nk", "--nats-creds", "b.creds"},
		{"audit", "--publish", "nats://127.0.0.1:1", "--publish-queue", "/tmp/q", "--nats-inbox-prefix", "_INBOX.>"},
		{"postmortem", "--nats", "nats://127.0.0.1:1", "f.rec"},
		{"postmortem", "--nats", "nats://127.0.0.1:1"},
		{"postmortem", "--nats", "nats://127.0.0.1:1", "--since", "yesterday"},
	} {
		_, _, err := runErr(args...)
		if err == nil || exitCode(err) != 2 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v (exit %d), want a one-line usage error", args, err, exitCode(err))
		}
	}
}

// A NATS nobody serves is an error (exit 1), not a hang.
func TestFleetStatusWithoutNATSFails(t *testing.T) {
	_, _, err := runErr("fleet", "status", "--nats", "nats://127.0.0.1:1")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "nats") {
		t.Fatalf("%v (exit %d)", err, exitCode(err))
	}
}

// A password or token in a NATS URL is refused, one line, naming the
// flags to use and not repeating it (the URL is logged and written to
// ready files).
func TestNATSURLWithCredentialsIsRefused(t *testing.T) {
	const secret = "s3cret-5d1e"
	for _, args := range [][]string{
		{"audit", "--publish", "nats://node17:" + secret + "@127.0.0.1:4222", "--publish-queue", "/tmp/q"},
		{"audit", "--publish", "nats://127.0.0.1:4222,nats://" + secret + "@n2:4222", "--publish-queue", "/tmp/q"},
		{"fleet", "--nats", "tls://fleet:" + secret + "@127.0.0.1:4222"},
		{"fleet", "status", "--nats", "nats://fleet:" + secret + "@127.0.0.1:4222"},
		{"postmortem", "--nats", "nats://fleet:" + secret + "@127.0.0.1:4222", "--since", "1h"},
		{"audit", "--publish", "node17:" + secret + "@127.0.0.1:4222", "--publish-queue", "/tmp/q"},
	} {
		stdout, stderr, err := runErr(args...)
		if err == nil || exitCode(err) != 2 || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--nats-password-file") ||
			strings.Contains(err.Error()+stdout+stderr, secret) {
			t.Errorf("%v: %v (exit %d), want a one-line usage error without the secret", args[:2], err, exitCode(err))
		}
	}
}

// add-host writes a seed (0600) and the authorization file the fleet
// loads, and prints the flags the host needs; the same host again is
// refused (exit 1) and changes nothing.
func TestFleetAddHost(t *testing.T) {
	dir := t.TempDir()
	auth, seed := filepath.Join(dir, "fleet-auth.conf"), filepath.Join(dir, "node17.nk")
	out, _, err := runErr("fleet", "add-host", "node17", "--auth", auth, "--seed", seed)
	if err != nil || !strings.Contains(out, "--nats-nkey FILE --nats-inbox-prefix _INBOX_node17") || !strings.Contains(out, "--host node17") {
		t.Fatalf("add-host: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(seed)
	fi, _ := os.Stat(seed)
	a, _ := os.ReadFile(auth)
	if !strings.HasPrefix(string(b), "SU") || fi.Mode().Perm() != 0o600 || !strings.Contains(string(a), `"apmwatch.finding.host.node17"`) ||
		strings.Contains(string(a), strings.TrimSpace(string(b))) || strings.Contains(out, strings.TrimSpace(string(b))) {
		t.Fatalf("seed %v %q, auth file:\n%s", fi.Mode(), b, a)
	}
	out, _, err = runErr("fleet", "add-host", "ops", "--fleet", "--auth", auth, "--seed", filepath.Join(dir, "ops.nk"))
	if err != nil || !strings.Contains(out, "fleet user ops") {
		t.Fatalf("add-host --fleet: %v %s", err, out)
	}
	before, _ := os.ReadFile(auth)
	if _, _, err := runErr("fleet", "add-host", "node17", "--auth", auth, "--seed", filepath.Join(dir, "again.nk")); err == nil || exitCode(err) != 1 {
		t.Fatalf("node17 again: %v (exit %d)", err, exitCode(err))
	}
	if after, _ := os.ReadFile(auth); string(after) != string(before) {
		t.Fatal("a refused add-host changed the file")
	}
}

// Without --publish-queue and --recorder-dir the queue is under the
// state directory.
func TestPublishQueueDefaultsToTheStateDirectory(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	old := stateDir
	stateDir = func() (string, error) { return state, nil }
	defer func() { stateDir = old }()
	p := publishFlags{url: "nats://127.0.0.1:1", queueMax: publish.DefaultQueueMax}
	pub, err := p.start(audit.Config{Host: "node17"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pub.Close(0)
	if fi, err := os.Stat(filepath.Join(state, "publish-queue")); err != nil || !fi.IsDir() {
		t.Fatalf("the default queue: %v", err)
	}
	stateDir = func() (string, error) { return "", errors.New("no home") }
	if _, err := p.start(audit.Config{Host: "node17"}, io.Discard); err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--publish-queue") {
		t.Fatalf("no state directory: %v", err)
	}
}

// fleet status -o json carries its version; an empty fabric's lists are
// [], never null; host strings are escaped.
func TestFleetStatusDoc(t *testing.T) {
	b, err := json.Marshal(fleetStatusDoc(&fleet.Status{Errors: map[string]string{"h\x1b": "x"}}))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if string(doc["schema"]) != "1" || string(doc["unprotected"]) != "[]" || string(doc["hosts"]) != "[]" ||
		string(doc["connections"]) != "{}" || strings.Contains(string(b), "\x1b") || !strings.Contains(string(doc["ends"]), "0") {
		t.Errorf("fleet status -o json: %s", b)
	}
}
