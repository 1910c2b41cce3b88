package fleet

import (
	"bufio"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/findingline"
	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// exampleKey is the NKey of one of docs/fleet.md's example users, derived
// from its name: the documentation shows the public keys, and no seed is
// kept anywhere.
func exampleKey(t *testing.T, name string) nkeys.KeyPair {
	t.Helper()
	sum := sha256.Sum256([]byte("apmwatch docs/fleet.md example user " + name))
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// exampleUsers are the documented file's users, in its order.
var exampleUsers = []struct {
	name  string
	fleet bool
}{{"node17", false}, {"node18", false}, {"fleet", true}}

// documentedAuth is the authorization file of docs/fleet.md (Security):
// its conf block that holds the add-host line.
func documentedAuth(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var block []string
	in, indent := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !in && strings.TrimSpace(l) == "```conf":
			// a block in a list item is indented as the item's text
			in, block, indent = true, nil, l[:strings.Index(l, "`")]
		case in && strings.TrimSpace(l) == "```":
			if b := strings.Join(block, "\n") + "\n"; strings.Contains(b, natsserver.AddMarker) {
				return b
			}
			in = false
		case in:
			block = append(block, strings.TrimPrefix(l, indent))
		}
	}
	t.Fatal("docs/fleet.md shows no authorization file (a conf block with the add-host line)")
	return ""
}

// The authorization file docs/fleet.md shows is, to the byte, what
// `apmwatch fleet add-host` writes for its three users; loaded as written
// into the embedded server, it runs two publishers and the fleet (their
// one-sided pair judged, fleet status and postmortem --nats read as the
// fleet user, a second instance started as the fleet user), and a host
// can publish nothing on another host's subjects.
func TestDocumentedAuthorization(t *testing.T) {
	doc := documentedAuth(t)
	want := natsserver.AuthSkeleton
	dir := t.TempDir()
	for _, u := range exampleUsers {
		kp := exampleKey(t, u.name)
		pub, _ := kp.PublicKey()
		var err error
		if want, err = natsserver.InsertUser(want, u.name, u.fleet, pub); err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		if err := os.WriteFile(filepath.Join(dir, u.name+".nk"), append(seed, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if doc != want {
		t.Fatalf("docs/fleet.md's authorization file is not what add-host writes; it would be:\n%s", want)
	}
	auth := filepath.Join(dir, "fleet-auth.conf")
	if err := os.WriteFile(auth, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := embeddedConfig(t)
	cfg.Auth = auth
	since := time.Now().Add(-time.Second)
	f, _ := runFleet(t, cfg)
	url := f.readyInfo(t).NATS
	a, b, _ := pairOver(t, fleettest.HostOpts(url, dir, "node17"), fleettest.HostOpts(url, dir, "node18"), "node17", "node18")
	a.Line(findingline.New(apm.Finding{ID: 1, Kind: apm.MissedRearm}, "node17"))
	oneSided(a, b, 1)
	fleettest.WaitFor(t, 60*time.Second, "a finding", func() bool { return len(f.out.lines(t)) == 1 })
	if l := f.out.lines(t)[0]; l.Kind != apm.OneSidedRearm || l.Host != "node18" || !slices.Equal(l.Hosts, []string{"node17", "node18"}) {
		t.Fatalf("finding: %+v", l)
	}

	fleetUser := natsconn.NATSOptions{URL: url, NKeyFile: filepath.Join(dir, "fleet.nk")}
	st, err := ReadStatus(context.Background(), fleetUser)
	if err != nil || len(st.Rows) != 1 || st.Rows[0].State != "one-sided" {
		t.Fatalf("fleet status as the fleet user: %v %+v", err, st)
	}
	fleettest.WaitFor(t, 20*time.Second, "the lines in the stream", func() bool {
		h, err := ReadHistory(context.Background(), HistoryOptions{NATS: fleetUser, Since: since, Until: time.Now().Add(time.Minute)})
		return err == nil && len(h.Lines) == 2 && len(h.Judged) == 1
	})
	second := DefaultConfig()
	second.NATS, second.Instance, second.Instances = fleetUser, 1, 2
	runFleet(t, second)

	nc, js := dial(t, fleettest.HostOpts(url, dir, "node17"))
	for _, s := range []string{wire.HostFindingSubject("node18"), "apmwatch.conn.3.node18.ibsim1.200", wire.FleetFindingSubject(3)} {
		mustDeny(t, nc, "node17 publishing on "+s, func(ctx context.Context) error {
			_, err := js.Publish(ctx, s, []byte(`{}`))
			return err
		})
	}
	mustDeny(t, nc, "node17 deleting a stream", func(ctx context.Context) error { return js.DeleteStream(ctx, wire.FindingsStream) })
	_, jf := dial(t, fleetUser)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	if _, err := natsconn.ReadAll(ctx, jf, wire.FindingsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{wire.HostFindingSubject("node18")}},
		func(jetstream.Msg) { n++ }); err != nil || n != 0 {
		t.Fatalf("node18's finding subject holds %d messages (%v), none of which node18 sent", n, err)
	}
}
