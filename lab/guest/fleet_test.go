//go:build labguest

// The fleet: two `apmwatch audit --publish` instances, one per ibsim
// device (they stand for two hosts), and `apmwatch fleet` with its
// embedded NATS pair both ends of every connection and judge them live.
package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// startFleet runs `apmwatch fleet` on its default address and waits until
// it consumes.
func startFleet(t *testing.T) *Proc {
	t.Helper()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	p := Start(t, "apmwatch", "fleet", "--store", filepath.Join(dir, "store"), "--ready-file", ready, "--metrics-addr", "127.0.0.1:19579")
	waitFile(t, p, ready)
	return p
}

// startPublisher runs `apmwatch audit --publish` for one device, named as
// one host.
func startPublisher(t *testing.T, dev, host string, metrics int) *Proc {
	t.Helper()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	args := append([]string{"audit", "--publish", "nats://127.0.0.1:4222", "--device", dev, "--host", host,
		"--publish-queue", filepath.Join(dir, "queue"), "--findings", filepath.Join(dir, "findings.jsonl"),
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", metrics), "--reconcile-interval", "1s", "--ready-file", ready,
		"--publish-heartbeat", "1s"}, labHooks(t)...)
	p := Start(t, "apmwatch", args...)
	waitFile(t, p, ready)
	return p
}

func waitFile(t *testing.T, p *Proc, path string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written in 60s\n%s", path, p.Dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// qpOf returns a finding line's "qp" (or "peer") object's field.
func qpOf(l Line, obj, key string) string {
	m, _ := l[obj].(map[string]any)
	return fmt.Sprint(m[key])
}

// lab-ibpair --behavior one-side and a port failure: one-sided-rearm for
// every pair, naming both hosts; rearm: none; never-rearm:
// unprotected-connection.
func TestFleetOneSidedRearmNamesBothHosts(t *testing.T) {
	const pairs = 2
	fl := startFleet(t)
	a := startPublisher(t, "ibsim0", "hostA", 19581)
	b := startPublisher(t, "ibsim1", "hostB", 19582)
	ib, ready := fleetIBPair(t, pairs, "one-side")
	down := time.Now()
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	for i := 0; i < len(ready); i++ {
		if ready[i].Str("dev") != "ibsim0" {
			continue
		}
		q0, q1 := ready[i].Int("qpn"), ready[i].Int("peer_qpn")
		ib.Wait(t, 0, evTimeout, Match("query", "after_react", "dev", "ibsim0", "qpn", q0))
		f, _ := fl.Wait(t, 0, evTimeout, func(l Line) bool {
			return l.Str("kind") == "one-sided-rearm" && qpOf(l, "qp", "qpn") == fmt.Sprint(q1)
		})
		if f.Str("type") != "finding" || f.Str("host") != "hostB" || qpOf(f, "qp", "device") != "ibsim1" ||
			qpOf(f, "peer", "host") != "hostA" || qpOf(f, "peer", "device") != "ibsim0" || qpOf(f, "peer", "qpn") != fmt.Sprint(q0) ||
			fmt.Sprint(f["hosts"]) != "[hostA hostB]" {
			t.Errorf("fleet finding for ibsim0 QP %d <-> ibsim1 QP %d: %v", q0, q1, f)
		}
		t.Logf("%.1fs after the port went down: %v", time.Since(down).Seconds(), f)
	}
	if n := len(Filter(fl.Lines(), Match("kind", "one-sided-rearm"))); n != pairs {
		t.Errorf("%d one-sided-rearm lines, want %d\n%s", n, pairs, fl.Dump())
	}
	st := MustRun(t, "apmwatch", "fleet", "status", "-o", "json")
	if len(st) != 1 || fmt.Sprint(st[0]["connections"].(map[string]any)["one-sided"]) != fmt.Sprint(pairs) {
		t.Errorf("fleet status: %v", st)
	}
	t.Logf("fleet status: %v", st)
	if err := ib.Stop(t); err != nil {
		t.Errorf("lab-ibpair: %v", err)
	}
	resetFabric(t)

	// both sides rearm: no finding
	from := len(fl.Lines())
	ib, ready = fleetIBPair(t, pairs, "rearm")
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	for _, r := range ready {
		ib.Wait(t, 0, evTimeout, Match("query", "after_react", "dev", r.Str("dev"), "qpn", r.Int("qpn")))
	}
	time.Sleep(5 * time.Second) // the fleet's 2 s deadline, a publish tick and a reading, twice over
	if ls := fl.Lines()[from:]; len(Filter(ls, Match("type", "finding"))) != 0 {
		t.Errorf("findings when both sides rearm: %v", ls)
	}
	if err := ib.Stop(t); err != nil {
		t.Errorf("lab-ibpair: %v", err)
	}
	resetFabric(t)

	// neither side rearms: unprotected-connection, naming both hosts
	ib, ready = fleetIBPair(t, 1, "never-rearm")
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	q0 := QPN(t, ready, "ibsim0")
	u, _ := fl.Wait(t, from, evTimeout, Match("kind", "unprotected-connection"))
	if u.Str("type") != "finding" || fmt.Sprint(u["hosts"]) != "[hostA hostB]" ||
		!(qpOf(u, "qp", "qpn") == fmt.Sprint(q0) || qpOf(u, "peer", "qpn") == fmt.Sprint(q0)) {
		t.Errorf("unprotected-connection: %v", u)
	}
	if err := ib.Stop(t); err != nil {
		t.Errorf("lab-ibpair: %v", err)
	}
	for _, p := range []*Proc{a, b, fl} {
		if err := p.Stop(t); err != nil {
			t.Errorf("%s: %v\n%s", p.Name, err, p.Dump())
		}
	}
}

// fleetIBPair runs lab-ibpair and waits for its ready lines.
func fleetIBPair(t *testing.T, pairs int, behavior string) (*Proc, []Line) {
	t.Helper()
	p := Start(t, "lab-ibpair", "--behavior", behavior, "--pairs", fmt.Sprint(pairs))
	t.Cleanup(func() { resetFabric(t) })
	return p, p.Ready(t, 2*pairs)
}

// With LMC 1 (every port answers two LIDs) and each primary path by the
// peer port's alias (DLID base + 1, source path bits 1), the fleet still
// pairs the ends (each record carries its port's LMC, the DLID is taken
// to its range's base) and gives the one-sided rearm naming both hosts.
func TestFleetPairsOnLMCAliases(t *testing.T) {
	MustRun(t, "lab-ib", "lmc", "1")
	t.Cleanup(func() { Run(t, "lab-ib", "lmc", "0") })
	fl := startFleet(t)
	startPublisher(t, "ibsim0", "hostA", 19581)
	startPublisher(t, "ibsim1", "hostB", 19582)
	ib := Start(t, "lab-ibpair", "--behavior", "one-side", "--pairs", "1", "--alias", "1")
	t.Cleanup(func() { resetFabric(t) })
	ready := ib.Ready(t, 2)
	q0, q1 := ready[0].Int("qpn"), ready[0].Int("peer_qpn")
	if ready[0].Str("dev") != "ibsim0" {
		q0, q1 = q1, q0
	}
	st, _ := ib.Wait(t, 0, evTimeout, Match("query", "ready", "dev", "ibsim0", "qpn", q0))
	if st.Int("dlid")%2 != 1 {
		t.Fatalf("the primary path does not run on an LMC alias (odd DLID under LMC 1): %v", st)
	}
	MustRun(t, "lab-ib", "port", "--dev", "ibsim0", "--port", "1", "down")
	ib.Wait(t, 0, evTimeout, Match("query", "after_react", "dev", "ibsim0", "qpn", q0))
	f, _ := fl.Wait(t, 0, evTimeout, func(l Line) bool {
		return l.Str("kind") == "one-sided-rearm" && qpOf(l, "qp", "qpn") == fmt.Sprint(q1)
	})
	if f.Str("host") != "hostB" || qpOf(f, "peer", "host") != "hostA" || qpOf(f, "peer", "qpn") != fmt.Sprint(q0) {
		t.Errorf("fleet finding on LMC aliases: %v", f)
	}
}
