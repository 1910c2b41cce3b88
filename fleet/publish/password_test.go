package publish

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/nats-io/nats-server/v2/server"
)

// A user's password comes from a file (--nats-user, --nats-password-file),
// never the URL: the publisher stores a line with it; a file that others
// may read, two lines or none, and a user without a file are refused.
func TestPublisherWithAPasswordFile(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, Username: "apmwatch", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := natsconn.NATSOptions{URL: s.ClientURL(), User: "apmwatch", PasswordFile: pw}
	p, err := NewPublisher(PublishConfig{NATS: o, Host: "hostA", QueueDir: filepath.Join(t.TempDir(), "q")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	p.Line(findingline.New(apm.Finding{ID: 7, Kind: apm.MissedRearm}, "hostA"))
	fleettest.WaitFor(t, 20*time.Second, "the line stored with the password from the file", func() bool { return p.q.Stats().Pending == 0 && sent(p) == 1 })

	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		want       string
	}{
		{"readable by others", "s3cret\n", 0o644, "chmod 600"},
		{"two lines", "a\nb\n", 0o600, "one non-empty line"},
		{"empty", "\n", 0o600, "one non-empty line"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(f, []byte(tc.body), tc.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f, tc.mode)
		_, err := (natsconn.NATSOptions{URL: s.ClientURL(), User: "apmwatch", PasswordFile: f}).Connect(false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if err := (natsconn.NATSOptions{User: "apmwatch"}).Validate(); err == nil {
		t.Error("a user without a password file was accepted")
	}
}
