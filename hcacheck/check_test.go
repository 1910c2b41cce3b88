package hcacheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/internal/uverbs"
	"golang.org/x/sys/unix"
)

func check(t *testing.T, f *fakeHCA, cfg Config) (*Report, error) {
	t.Helper()
	rep, err := Check(context.Background(), cfg, Deps{Sys: fakeSys(t), Backend: func() Backend { return f }})
	if !f.closed || len(f.qps) != 0 || len(f.cqs) != 0 || len(f.pds) != 0 {
		t.Errorf("left behind: closed %v, QPs %v, CQs %v, PDs %v", f.closed, f.qps, f.cqs, f.pds)
	}
	return rep, err
}

func answers(r *Report) map[string]string {
	m := map[string]string{}
	for _, p := range r.Points {
		m[p.Point] = p.Answer
	}
	return m
}

// Every combination of the lab's five behaviour knobs comes back as
// exactly the knobs set; the other points give the IBTA answers.
func TestKnobsComeBackAsSet(t *testing.T) {
	for _, armed := range []string{"refuse", "accept"} {
		for _, forced := range []string{"none", "inside", "after"} {
			for _, alt := range []string{"copy", "zero"} {
				for _, dead := range []string{"retry", "pathmig-err"} {
					for _, unloaded := range []string{"0", "1"} {
						name := strings.Join([]string{armed, forced, alt, dead, unloaded}, ",")
						t.Run(name, func(t *testing.T) {
							f := newFake()
							f.armedAccept, f.forced, f.altZero, f.deadPMErr = armed == "accept", forced, alt == "zero", dead == "pathmig-err"
							f.unloaded1 = unloaded == "1"
							rep, err := check(t, f, quick("ibsim0"))
							if err != nil {
								t.Fatalf("%v\n%+v", err, rep)
							}
							want := map[string]string{PtArmedModify: armed, PtForcedEvent: forced, PtAltAfterMig: alt, PtDeadAlt: dead,
								PtUnloadedAlt: unloaded}
							if !maps.Equal(rep.Knobs, want) {
								t.Errorf("knobs %v, want %v\n%+v", rep.Knobs, want, rep.Points)
							}
							a := answers(rep)
							for p, w := range map[string]string{PtRearmOnArmed: AnsRefuse, PtMigFromRearm: AnsRefuse,
								PtResponderEv: AnsRaised, PtCommEstAfter: AnsNone, PtOneWayArm: AnsBoth} {
								if a[p] != w {
									t.Errorf("%s: %q, want %q (%+v)", p, a[p], w, rep.Points)
								}
							}
							if len(rep.Points) != len(pointOrder) {
								t.Errorf("%d points, want %d", len(rep.Points), len(pointOrder))
							}
							for i, p := range rep.Points {
								if p.Point != pointOrder[i] {
									t.Errorf("point %d is %s, want %s", i, p.Point, pointOrder[i])
								}
							}
						})
					}
				}
			}
		}
	}
}

// Behaviours no knob covers show in their points, and keep their knobs out
// when they are no knob value.
func TestMisbehavingHCA(t *testing.T) {
	for _, c := range []struct {
		name  string
		set   func(*fakeHCA)
		point string
		want  string
	}{
		{"rearm on armed accepted", func(f *fakeHCA) { f.rearmOnArmedOK = true }, PtRearmOnArmed, AnsAccept},
		{"migrated from rearm accepted", func(f *fakeHCA) { f.migFromRearmOK = true }, PtMigFromRearm, AnsAccept},
		{"comm-est after migration", func(f *fakeHCA) { f.commEstAfterMig = true }, PtCommEstAfter, AnsRaised},
		{"paths swapped", func(f *fakeHCA) { f.swap = true }, PtAltAfterMig, AnsSwap},
		{"acks carry no migreq", func(f *fakeHCA) { f.ackNoMigReq = true }, PtOneWayArm, AnsRespOnl},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := ibtaFake()
			c.set(f)
			rep, err := check(t, f, quick("ibsim0"))
			if err != nil {
				t.Fatal(err)
			}
			if got := answers(rep)[c.point]; got != c.want {
				t.Errorf("%s: %q, want %q (%+v)", c.point, got, c.want, rep.Points)
			}
			if c.point == PtAltAfterMig {
				if _, ok := rep.Knobs[PtAltAfterMig]; ok {
					t.Errorf("knobs %v: swap is no knob value", rep.Knobs)
				}
			}
		})
	}
}

// A responder that never arms stops the check with a bounded wait, the
// points left marked not-run, and everything destroyed.
func TestSetupThatNeverArms(t *testing.T) {
	f := ibtaFake()
	f.neverArm = true
	start := time.Now()
	rep, err := check(t, f, quick("ibsim0"))
	if err == nil || !strings.Contains(err.Error(), "A MIGRATED") && !strings.Contains(err.Error(), "REARM") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if a := answers(rep); a[PtDeadAlt] != AnsNotRun || a[PtForcedEvent] != AnsNotRun || a[PtArmedModify] != AnsRefuse {
		t.Errorf("answers %v", a)
	}
	if len(f.destroyed) != 2 {
		t.Errorf("destroyed %v", f.destroyed)
	}
}

// A create that fails (as on a driver that needs provider data) destroys
// what was made and says why.
func TestCreateFailureTearsDown(t *testing.T) {
	f := ibtaFake()
	f.createQPErr = fmt.Errorf("CREATE_QP: %w", unix.EFAULT)
	rep, err := check(t, f, quick("ibsim0"))
	if err == nil || !strings.Contains(err.Error(), "libibverbs") {
		t.Fatalf("err %v", err)
	}
	if len(f.destroyed) != 1 || rep == nil || answers(rep)[PtArmedModify] != AnsNotRun {
		t.Errorf("destroyed %v, report %+v", f.destroyed, rep)
	}
}

// An interrupt ends a wait at once and still tears down.
func TestInterruptTearsDown(t *testing.T) {
	f := ibtaFake()
	f.neverArm = true
	cfg := quick("ibsim0")
	cfg.ArmWait = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Check(ctx, cfg, Deps{Sys: fakeSys(t), Backend: func() Backend { return f }})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("err %v", err)
	}
	if time.Since(start) > 5*time.Second || !f.closed || len(f.qps) != 0 {
		t.Errorf("took %v, closed %v, QPs left %v", time.Since(start), f.closed, f.qps)
	}
}

// Devices and flags refused before anything is made.
func TestRefusals(t *testing.T) {
	sys := fakeSys(t)
	for _, c := range []struct {
		dev, want string
		set       func(*Config)
	}{
		{"rxe0", "rxe0 port 1 has link layer Ethernet, not InfiniBand", nil},
		{"nosuch0", "no RDMA device named nosuch0", nil},
		{"mlx5_0", "mlx5_0 is driven by mlx5_core", nil},
		{"down0", "down0 port 1 is not ACTIVE", nil},
		{"nolid0", "no unicast LID", nil},
		{"ibsim0", "ibsim0 has no port 3", func(c *Config) { c.AltPort = 3 }},
		{"ibsim0", "--dead-lid 2 is a LID of ibsim0 port 2", func(c *Config) { c.DeadLID = 2 }},
		{"ibsim0", "--dead-lid 49152 is no unicast LID", func(c *Config) { c.DeadLID = 0xc000 }},
		{"ibsim0", "--timeout 0", func(c *Config) { c.Timeout = 0 }},
		{"ibsim0", "--retry-cnt 8", func(c *Config) { c.RetryCnt = 8 }},
		{"ibsim0", "--port and --alt-port", func(c *Config) { c.Port = 0 }},
		{"", "--dev is required", nil},
		{"../ibsim0", "not an RDMA device name", nil},
	} {
		cfg := quick(c.dev)
		if c.set != nil {
			c.set(&cfg)
		}
		opened := false
		rep, err := Check(context.Background(), cfg, Deps{Sys: sys, Backend: func() Backend { opened = true; return newFake() }})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want one line with %q", c.dev, err, c.want)
		}
		if rep != nil || opened {
			t.Errorf("%s: report %v, backend made %v", c.dev, rep, opened)
		}
	}
}

// The same port for both paths: an LMC path when the port has one, else
// the same path with a note, and alt-after-migration cannot decide.
func TestSamePort(t *testing.T) {
	f := ibtaFake()
	cfg := quick("ibsim0")
	cfg.AltPort = 1
	rep, err := check(t, f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a := answers(rep); a[PtAltAfterMig] != AnsSame {
		t.Errorf("alt-after-migration %q", a[PtAltAfterMig])
	}
	if _, ok := rep.Knobs[PtAltAfterMig]; ok || !strings.Contains(strings.Join(rep.Notes, "\n"), "primary's own path") {
		t.Errorf("knobs %v notes %v", rep.Knobs, rep.Notes)
	}
}

func TestReportJSON(t *testing.T) {
	rep, err := check(t, mlx5Fake(), quick("ibsim0"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.Write(&b, true); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Device  string `json:"device"`
		Port    int    `json:"port"`
		AltPort int    `json:"alt_port"`
		Points  []struct {
			Point, Answer, Errno, Event, Detail string
		} `json:"points"`
		Knobs map[string]string `json:"knobs"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	want := map[string]string{PtArmedModify: "accept", PtForcedEvent: "none", PtAltAfterMig: "zero", PtDeadAlt: "pathmig-err", PtUnloadedAlt: "0"}
	if doc.Device != "ibsim0" || doc.Port != 1 || doc.AltPort != 2 || !maps.Equal(doc.Knobs, want) || len(doc.Points) != len(pointOrder) {
		t.Errorf("document %+v", doc)
	}
	if doc.Points[0].Point != PtArmedModify || doc.Points[0].Errno != "0" || !strings.Contains(doc.Points[0].Detail, "reads ARMED after") {
		t.Errorf("first point %+v", doc.Points[0])
	}
	for _, p := range doc.Points {
		if p.Point == PtDeadAlt && p.Event != "A:PATH_MIG_ERR" {
			t.Errorf("dead-alternate events %q", p.Event)
		}
	}
}

// Strings from the host reach the terminal escaped.
func TestReportTableEscapes(t *testing.T) {
	r := &Report{Device: "ib\x1b[2J0", Driver: "drv\n", Port: 1, AltPort: 2,
		Points: []Point{{Point: PtArmedModify, Answer: "refuse", Errno: "EINVAL", Detail: "a\rb"}},
		Knobs:  map[string]string{PtArmedModify: "refuse"}, Notes: []string{"n\x07"}}
	var b bytes.Buffer
	if err := r.Write(&b, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"\x1b", "\r", "\x07", "drv\n"} {
		if strings.Contains(out, bad) {
			t.Errorf("raw %q in %q", bad, out)
		}
	}
	for _, want := range []string{`ib\x1b[2J0`, "lab knobs: armed-modify=refuse", `note: n\x07`, "EINVAL"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	b.Reset()
	if err := r.Write(&b, true); err != nil || strings.Contains(b.String(), `\u001b`) || !strings.Contains(b.String(), `ib\\x1b[2J0`) {
		t.Errorf("json %v %s", err, b.String())
	}
}

// The decision tables, each answer with a case for it and against it.
func TestDecideModify(t *testing.T) {
	for err, want := range map[error]string{
		nil: AnsAccept, unix.EINVAL: AnsRefuse, fmt.Errorf("MODIFY_QP: %w", unix.EINVAL): AnsRefuse,
		unix.EOPNOTSUPP: AnsError, unix.EPERM: AnsError, errors.New("no errno"): AnsError,
	} {
		if got := decideModify(err); got != want {
			t.Errorf("%v: %s, want %s", err, got, want)
		}
	}
	if errnoName(nil) != "0" || errnoName(fmt.Errorf("x: %w", unix.EINVAL)) != "EINVAL" || errnoName(errors.New("odd")) != "odd" {
		t.Error("errno names")
	}
}

func TestDecideForcedEvent(t *testing.T) {
	for _, c := range []struct {
		atReturn, later bool
		want            string
	}{{true, false, AnsInside}, {true, true, AnsInside}, {false, true, AnsAfter}, {false, false, AnsNone}} {
		if got := decideForcedEvent(c.atReturn, c.later); got != c.want {
			t.Errorf("%+v: %s", c, got)
		}
	}
}

func TestDecideAlt(t *testing.T) {
	old := path{Port: 1, DLID: 1}
	attr := func(port uint8, dlid uint16, altPort uint8, altDLID uint16) uverbs.Attr {
		return uverbs.Attr{PortNum: port, Dest: uverbs.Dest{DLID: dlid}, AltPortNum: altPort, AltDest: uverbs.Dest{DLID: altDLID}}
	}
	for _, c := range []struct {
		a    uverbs.Attr
		old  path
		want string
	}{
		{attr(2, 2, 2, 2), old, AnsCopy},
		{attr(2, 2, 0, 0), old, AnsZero},
		{attr(2, 2, 0, 2), old, AnsZero}, // no port
		{attr(2, 2, 2, 0), old, AnsZero}, // no DLID
		{attr(2, 2, 1, 1), old, AnsSwap},
		{attr(2, 2, 1, 9), old, AnsOther},
		{attr(1, 1, 1, 1), old, AnsSame},
		{uverbs.Attr{PortNum: 1, Dest: uverbs.Dest{DLID: 2, SrcPathBits: 1}, AltPortNum: 1, AltDest: uverbs.Dest{DLID: 2, SrcPathBits: 1}},
			path{Port: 1, DLID: 1}, AnsCopy}, // LMC paths
	} {
		if got := decideAlt(c.a, c.old); got != c.want {
			t.Errorf("%+v from %+v: %s, want %s", c.a, c.old, got, c.want)
		}
	}
}

func TestDecideOneWay(t *testing.T) {
	for _, c := range []struct {
		req, resp bool
		want      string
	}{{true, true, AnsBoth}, {false, true, AnsRespOnl}, {true, false, AnsReqOnly}, {false, false, AnsNeither}} {
		if got := decideOneWay(c.req, c.resp); got != c.want {
			t.Errorf("%+v: %s", c, got)
		}
	}
}

func TestDecideDeadAlt(t *testing.T) {
	for _, c := range []struct {
		s    deadSeen
		want string
	}{
		{deadSeen{PathMig: true, RetryExc: true, Err: true}, AnsRetry},
		{deadSeen{PathMig: true, Err: true}, AnsRetry},
		{deadSeen{PathMig: true, RetryExc: true}, AnsRetry},
		{deadSeen{PathMigErr: true, Err: true}, AnsPMErr},
		{deadSeen{PathMigErr: true}, AnsPMErr},
		{deadSeen{PathMig: true, PathMigErr: true, Err: true}, AnsPMErr},
		{deadSeen{PathMig: true}, "pathmig-only"},
		{deadSeen{RetryExc: true, Err: true}, "died-unmigrated"},
		{deadSeen{}, AnsNone},
	} {
		if got := decideDeadAlt(c.s); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}

func TestKnobsOnlyKnobValues(t *testing.T) {
	got := knobs([]Point{{Point: PtArmedModify, Answer: AnsError}, {Point: PtForcedEvent, Answer: AnsAfter},
		{Point: PtAltAfterMig, Answer: AnsSwap}, {Point: PtDeadAlt, Answer: AnsNotRun}, {Point: PtRearmOnArmed, Answer: AnsRefuse}})
	if !maps.Equal(got, map[string]string{PtForcedEvent: AnsAfter}) {
		t.Errorf("knobs %v", got)
	}
}

func TestNeedsProvider(t *testing.T) {
	for _, c := range []struct{ driver, dev, want string }{
		{"mlx5_core", "mlx5_0", "mlx5_core"}, {"mlx4_core", "ibp1s0", "mlx4_core"}, {"ib_mthca", "mthca0", "ib_mthca"},
		{"", "mthca0", "mthca"}, {"", "ibsim0", ""}, {"hfi1", "hfi1_0", ""}, {"ib_qib", "qib0", ""},
	} {
		if got := needsProvider(c.driver, c.dev); got != c.want {
			t.Errorf("%+v: %q", c, got)
		}
	}
}
