package postmortem

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/recording"
)

// A healthy fabric of identical nodes: every host has the same two rails
// (mlx5_0, mlx5_1) and hands out the same QPNs, connections run between
// random hosts on one rail (criss-crossed, both directions), and every
// migration is rearmed on both ends. The pairing must find exactly the
// true pairs, and no two-sided finding.
func TestPropertyIdenticalNodesPairTrue(t *testing.T) {
	const hosts, rails, conns = 3, 2, 8
	lid := func(h, r int) uint16 { return uint16(0x100*(h+1) + 0x10*r + 1) }
	dev := func(r int) string { return fmt.Sprintf("mlx5_%d", r) }
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 0x9a1e))
		bs := make([]*apmtest.Builder, hosts)
		for h := range bs {
			bs[h] = newHost(0)
		}
		next := map[[2]int]uint32{} // (host, rail) -> next QPN: the same on every host
		qpn := func(h, r int) uint32 {
			k := [2]int{h, r}
			if next[k] == 0 {
				next[k] = 100
			}
			next[k]++
			return next[k]
		}
		type end struct {
			h, r int
			qpn  uint32
		}
		var pairs [][2]end
		for range conns {
			a := rng.IntN(hosts)
			b := (a + 1 + rng.IntN(hosts-1)) % hosts
			r := rng.IntN(rails)
			ea, eb := end{a, r, qpn(a, r)}, end{b, r, qpn(b, r)}
			for _, x := range [2][2]end{{ea, eb}, {eb, ea}} {
				bl := bs[x[0].h]
				bl.Device = dev(r)
				connect(bl, x[0].qpn, x[1].qpn, lid(x[1].h, r))
			}
			pairs = append(pairs, [2]end{ea, eb})
		}
		for i, p := range pairs { // every migration rearmed on both ends
			if rng.IntN(2) == 0 {
				continue
			}
			at2 := time.Duration(10+i) * time.Second
			for _, x := range [2][2]end{{p[0], p[1]}, {p[1], p[0]}} {
				bl := bs[x[0].h]
				bl.Device = dev(x[0].r)
				at(bl, at2).PathMig(x[0].qpn)
				bl.After(time.Millisecond).LoadAlt(x[0].qpn, event.Path{Port: 1, DLID: lid(x[1].h, x[1].r)})
				bl.Rearm(x[0].qpn)
			}
		}
		dir := t.TempDir()
		var paths []string
		for h, bl := range bs {
			var ports []event.PortAddr
			for r := range rails {
				ports = append(ports, event.PortAddr{Device: dev(r), Port: 1, LID: lid(h, r)}, event.PortAddr{Device: dev(r), Port: 2, LID: lid(h, r) + 1})
			}
			p := filepath.Join(dir, fmt.Sprintf("host-%d.rec", h))
			w, err := recording.Create(p, event.Meta{Host: fmt.Sprintf("host-%d", h), BootOffset: time.Duration(bl.Start.UnixNano()), Ports: ports}, recording.Options{FlushInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range bl.Steps {
				if err := w.Write(s.Ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		r := run(t, Options{}, paths...)
		want := map[string]bool{}
		for _, p := range pairs {
			a := fmt.Sprintf("host-%d/%s/%d#", p[0].h, dev(p[0].r), p[0].qpn)
			b := fmt.Sprintf("host-%d/%s/%d#", p[1].h, dev(p[1].r), p[1].qpn)
			want[a+"|"+b], want[b+"|"+a] = true, true
		}
		cut := func(id string) string { return id[:strings.LastIndex(id, "#")+1] }
		for _, p := range r.Pairs {
			if !want[cut(p.A)+"|"+cut(p.B)] {
				t.Errorf("seed %d: a false pair %s <-> %s", seed, p.A, p.B)
			}
		}
		if len(r.Pairs) != len(pairs) || len(r.Unpaired) != 0 || r.Summary.Findings[string(OneSidedRearm)] != 0 {
			t.Errorf("seed %d: %d pairs of %d, unpaired %+v, findings %v", seed, len(r.Pairs), len(pairs), r.Unpaired, r.Summary.Findings)
		}
	}
}
