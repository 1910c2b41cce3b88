package postmortem

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/connid"
	"github.com/apmwatch/apmwatch/event"
)

// Recordings made before headers carried the port addresses, of pairs
// without CM MADs: nothing in them proves a port's address, so their ends
// are listed unpaired, with why, and no two-sided finding is judged.
func TestOlderRecordingsUnpaired(t *testing.T) {
	for _, files := range [][]string{{"pair-rxe0.rec", "pair-rxe1.rec"}, {"rearm-then-alt.rec"}} {
		var paths []string
		for _, f := range files {
			paths = append(paths, filepath.Join("testdata", "older", f))
		}
		r := run(t, Options{}, paths...)
		if len(r.Pairs) != 0 || r.Summary.Unpaired != 1 || len(r.Unpaired) != 1 ||
			!strings.HasPrefix(r.Unpaired[0].Why, connid.WhyNoIdentity) || r.Summary.Findings[string(OneSidedRearm)] != 0 {
			t.Errorf("%v: pairs %+v unpaired %+v findings %v", files, r.Pairs, r.Unpaired, r.Summary.Findings)
		}
		var text, js strings.Builder
		if err := WriteText(&text, r); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(&js, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), ": unpaired: no path identity") || !strings.Contains(js.String(), `"why": "no path identity`) {
			t.Errorf("%v: the text or JSON does not say why it is unpaired:\n%s", files, text.String())
		}
	}
}

// oneRecording writes the builder as one recording and runs it.
func oneRecording(t *testing.T, b *apmtest.Builder) *Report {
	t.Helper()
	return run(t, Options{}, write(t, t.TempDir(), "one.rec", "lab", b, uint64(10*time.Second)))
}

// Within one recording: two rails of one process, each talking to its own
// peer (not recorded), hand out the same QPN and each points at it: not a
// pair. Loopback between two HCAs whose paths lead to each other is.
func TestOneRecordingTwoRails(t *testing.T) {
	b := newHost(0)
	b.Device = "mlx5_0"
	ownLIDs(b, 1)
	connect(b, 100, 100, 0x31) // to a peer host's LID
	b.Device = "mlx5_1"
	ownLIDs(b, 2)
	connect(b, 100, 100, 0x41) // to another peer host
	b.Device = "mlx5_0"
	b.After(time.Second).PathMig(100)
	b.Rearm(100)
	r := oneRecording(t, b)
	if len(r.Pairs) != 0 || len(r.Unpaired) != 1 || !strings.HasPrefix(r.Unpaired[0].Why, connid.WhyElsewhere) {
		t.Fatalf("two rails: pairs %+v unpaired %+v", r.Pairs, r.Unpaired)
	}
	if r.Summary.Findings[string(OneSidedRearm)] != 0 {
		t.Fatalf("a two-sided finding on an unpaired QP: %v", r.Summary.Findings)
	}
	// the same QPNs, the rails' paths leading to each other: a loopback
	b = newHost(0)
	b.Device = "mlx5_0"
	ownLIDs(b, 1)
	connect(b, 100, 100, 2)
	b.Device = "mlx5_1"
	ownLIDs(b, 2)
	connect(b, 100, 100, 1)
	if r := oneRecording(t, b); len(r.Pairs) != 1 || len(r.Unpaired) != 0 {
		t.Fatalf("loopback: pairs %+v unpaired %+v", r.Pairs, r.Unpaired)
	}
}

// Identical nodes: host-a and host-b criss-cross (a/100 -> b/200, a/200 ->
// b/100) and host-c, whose QPNs collide with both, talks to a host not
// recorded. Each pairs with its real peer or not at all.
func TestIdenticalNodesCollidingQPNs(t *testing.T) {
	a, b, c := newHost(0), newHost(0), newHost(0)
	ownLIDs(a, 0x10)
	ownLIDs(b, 0x20)
	ownLIDs(c, 0x30)
	connect(a, 100, 200, 0x20)
	connect(a, 200, 100, 0x20)
	connect(b, 200, 100, 0x10)
	connect(b, 100, 200, 0x10)
	connect(c, 100, 200, 0x40)
	connect(c, 200, 100, 0x40)
	connect(c, 300, 300, 0x40) // destination QPN its own
	connect(a, 300, 300, 0x20)
	connect(b, 300, 300, 0x10)
	dir := t.TempDir()
	r := run(t, Options{}, write(t, dir, "a.rec", "host-a", a, uint64(5*time.Second)),
		write(t, dir, "b.rec", "host-b", b, uint64(5*time.Second)), write(t, dir, "c.rec", "host-c", c, uint64(5*time.Second)))
	got := map[string]bool{}
	for _, p := range r.Pairs {
		got[p.A+" "+p.B] = true
	}
	want := map[string]bool{"host-a/mlx5_0/100#1 host-b/mlx5_0/200#1": true, "host-a/mlx5_0/200#2 host-b/mlx5_0/100#2": true,
		"host-a/mlx5_0/300#3 host-b/mlx5_0/300#3": true}
	if !maps.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
	for _, u := range r.Unpaired {
		if !strings.Contains(u.A+u.B, "host-c") || !strings.HasPrefix(u.Why, connid.WhyElsewhere) {
			t.Errorf("unpaired %+v", u)
		}
	}
	if len(r.Unpaired) == 0 {
		t.Error("host-c's QPs are not listed unpaired")
	}
}

// Two hosts whose ports have LMC 2 (four LIDs each) and whose connection
// runs on non-base LIDs: their headers' LMCs pair them, and the one-sided
// rearm is found. The same recordings with LMC 0 (as older recordings
// read) do not pair: their paths lead elsewhere.
func TestPairingWithinLMC(t *testing.T) {
	for _, lmc := range []uint8{2, 0} {
		a, b := newHost(0), newHost(0)
		connect(a, 100, 200, 0x11) // b's port 1 base 0x10: path bits 1; alternate 0x12
		connect(b, 200, 100, 0x21) // a's port 1 base 0x20; alternate 0x22
		a.After(time.Second).PathMig(100)
		b.After(time.Second + 300*time.Microsecond).PathMig(200)
		a.After(time.Millisecond).LoadAlt(100, event.Path{Port: 1, DLID: 0x13})
		a.Rearm(100)
		ports := func(base uint16) []event.PortAddr {
			return []event.PortAddr{{Device: "mlx5_0", Port: 1, LID: base, LMC: lmc}, {Device: "mlx5_0", Port: 2, LID: base + 4, LMC: lmc}}
		}
		dir := t.TempDir()
		r := run(t, Options{},
			writePorts(t, dir, "a.rec", "host-a", ports(0x20), a, uint64(10*time.Second)),
			writePorts(t, dir, "b.rec", "host-b", ports(0x10), b, uint64(10*time.Second)))
		paired, onesided := len(r.Pairs) == 1, r.Summary.Findings["one-sided-rearm"] == 1
		if lmc != 0 && (!paired || !onesided) {
			t.Errorf("LMC %d: pairs %d, findings %v, unpaired %+v: want the two ends paired and the one-sided rearm", lmc, len(r.Pairs), r.Summary.Findings, r.Unpaired)
		}
		if lmc == 0 && (paired || onesided) {
			t.Errorf("LMC 0: pairs %d, findings %v: want no pairing (the paths lead to no base LID)", len(r.Pairs), r.Summary.Findings)
		}
	}
}
