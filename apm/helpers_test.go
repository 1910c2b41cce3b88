package apm_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/apm/apmtest"
	"github.com/apmwatch/apmwatch/event"
)

// scenario is one story of a QP and the findings it must give: exactly
// these kinds (and resolutions), nothing more.
type scenario struct {
	name     string
	story    func(b *apmtest.Builder)
	want     []apm.Kind // findings, in any order
	resolved []apm.Kind // resolution updates, in any order
	cfg      func(*apm.Config)
}

const qpn = 0x1a2 // the QP most stories are about

// cmID is the local CM communication id of the QP in the CM stories.
const cmID = 0x5150

// settle is how long after the last step the clock runs so every deadline
// is judged.
const settle = 5 * time.Minute

func runScenarios(t *testing.T, table []scenario) {
	t.Helper()
	for _, sc := range table {
		t.Run(sc.name, func(t *testing.T) {
			cfg := apm.DefaultConfig()
			if sc.cfg != nil {
				sc.cfg(&cfg)
			}
			b := apmtest.New()
			sc.story(b)
			got, _, err := apmtest.Run(cfg, b.Steps, settle)
			if err != nil {
				t.Fatal(err)
			}
			checkKinds(t, got, sc.want, sc.resolved)
		})
	}
}

func checkKinds(t *testing.T, got []apm.Finding, want, resolved []apm.Kind) {
	t.Helper()
	var gk, gr []apm.Kind
	for _, f := range got {
		if f.Resolved {
			gr = append(gr, f.Kind)
		} else {
			gk = append(gk, f.Kind)
		}
		checkFinding(t, f)
	}
	slices.Sort(gk)
	slices.Sort(gr)
	w, r := slices.Clone(want), slices.Clone(resolved)
	slices.Sort(w)
	slices.Sort(r)
	checkResolutions(t, got)
	if !slices.Equal(gk, w) || !slices.Equal(gr, r) {
		t.Errorf("findings %v resolved %v, want %v resolved %v", gk, gr, w, r)
		for _, f := range got {
			t.Logf("  %s", f.String())
		}
	}
}

// checkFinding checks what every finding must carry.
func checkFinding(t *testing.T, f apm.Finding) {
	t.Helper()
	if f.ID == 0 || f.QP.Device == "" || f.QP.QPN == 0 || f.QP.Gen == 0 {
		t.Errorf("%s: incomplete identity %+v", f.Kind, f.QP)
	}
	if len(f.Evidence) == 0 || f.Explanation == "" || f.Remediation == "" {
		t.Errorf("%s: missing evidence, explanation or remediation: %+v", f.Kind, f)
	}
	if f.First == 0 || f.Last < f.First {
		t.Errorf("%s: bad times first %d last %d", f.Kind, f.First, f.Last)
	}
	if f.JudgedAt < f.Last {
		t.Errorf("%s: judged at %d, before its last evidence %d", f.Kind, f.JudgedAt, f.Last)
	}
	if strings.Contains(f.Explanation, "\n") {
		t.Errorf("%s: explanation is not one sentence: %q", f.Kind, f.Explanation)
	}
	if f.Resolved && f.Resolves == 0 {
		t.Errorf("%s: resolution without the finding it resolves", f.Kind)
	}
}

// armedQP is a connected RC QP on PathA with PathB loaded as alternate and
// armed by the peer's traffic: the state before every migration story.
func armedQP(b *apmtest.Builder) {
	alt := apmtest.PathB
	b.Connect(qpn, apmtest.PathA, &alt)
	b.After(10 * time.Millisecond)
}

// cmQP is armedQP driven by the CM: the CM told the QP's
// establishment with ib_cm_notify(COMM_EST), which ties comm id cmID to it.
func cmQP(b *apmtest.Builder) {
	armedQP(b)
	b.Notify(qpn, event.EvCommEst, -106 /* -EISCONN: already established */, cmID)
}

func findOne(t *testing.T, got []apm.Finding, k apm.Kind, resolved bool) apm.Finding {
	t.Helper()
	for _, f := range got {
		if f.Kind == k && f.Resolved == resolved {
			return f
		}
	}
	t.Fatalf("no %s (resolved %v) in %d findings", k, resolved, len(got))
	return apm.Finding{}
}

// checkResolutions checks that a resolution follows the finding it
// resolves: never dated before it, never judged before it.
func checkResolutions(t *testing.T, got []apm.Finding) {
	t.Helper()
	byID := map[uint64]apm.Finding{}
	for _, f := range got {
		if !f.Resolved {
			byID[f.ID] = f
			continue
		}
		o, ok := byID[f.Resolves]
		if !ok {
			t.Errorf("%s: resolution of %d, which came before no finding", f.Kind, f.Resolves)
			continue
		}
		if f.JudgedAt < o.JudgedAt {
			t.Errorf("%s: resolution judged at %d, before its finding (%d)", f.Kind, f.JudgedAt, o.JudgedAt)
		}
		if f.Last < o.Last {
			t.Errorf("%s: resolution dated %d, before its finding (%d)", f.Kind, f.Last, o.Last)
		}
	}
}
