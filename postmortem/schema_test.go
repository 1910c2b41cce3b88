package postmortem

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/findingline/findinglinetest"
)

// Every finding of a postmortem report, and every resolution it carries,
// is a line of the one finding schema (the examples hold findings of most
// kinds and resolutions).
func TestReportFindingsMatchSchema(t *testing.T) {
	checked, resolutions := 0, 0
	// a rearm 3 s after the migration: missed-rearm, then its resolution
	late := newHost(0)
	connect(late, 100, 200, 0x11)
	late.After(time.Second).PathMig(100)
	late.After(3*time.Second).LoadAlt(100, event.Path{Port: 1, DLID: 0x13})
	late.Rearm(100)
	latePath := write(t, t.TempDir(), "late.rec", "host-a", late, uint64(10*time.Second))
	for _, files := range [][]string{{latePath}, {"missed-rearm.rec"}, {"rearm-then-alt.rec"}, {"mig-state-mismatch.rec"},
		{"ib-unprotected-failure.rec"}, {"ib-lap-race.rec"}, {"ib-pair-ibsim0.rec", "ib-pair-ibsim1.rec"}} {
		var paths []string
		for _, f := range files {
			if !filepath.IsAbs(f) {
				f = filepath.Join("..", "examples", f)
			}
			paths = append(paths, f)
		}
		var b bytes.Buffer
		if err := WriteJSON(&b, run(t, Options{}, paths...)); err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Findings []json.RawMessage `json:"findings"`
		}
		if err := json.Unmarshal(b.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		for _, raw := range rep.Findings {
			checked++
			if err := findinglinetest.Check(raw); err != nil {
				t.Errorf("%v: %v\n%s", files, err, raw)
			}
			var f struct {
				Resolution json.RawMessage `json:"resolution"`
			}
			if json.Unmarshal(raw, &f) == nil && f.Resolution != nil {
				resolutions++
				if err := findinglinetest.Check(f.Resolution); err != nil {
					t.Errorf("%v resolution: %v\n%s", files, err, f.Resolution)
				}
			}
		}
	}
	if checked < 8 || resolutions == 0 {
		t.Errorf("checked %d findings and %d resolutions: the examples changed, find others", checked, resolutions)
	}
}
