package actuator

import (
	"os"
	"strings"
	"testing"
	"time"
)

const goodPolicy = `{
  "mode": "enforce",
  "grace": "2s",
  "allow": {"devices": ["mlx5_0"], "comms": ["app"]},
  "rate_limit": {"max": 3, "per": "1m"},
  "alternates": [{"device": "mlx5_0", "port": 1, "alt": {"port": 2, "dlid": 7, "timeout": 16}}],
  "previous_primary": true,
  "rearm_without_alternate": false
}`

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(goodPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeEnforce || time.Duration(p.Grace) != 2*time.Second || p.RateLimit.Max != 3 || !p.PreviousPrimary {
		t.Errorf("parsed %+v", p)
	}
	a, ok := p.alternate("mlx5_0", 1)
	if !ok || a.Port != 2 || a.Dest.PortNum != 2 || a.Dest.DLID != 7 || a.Timeout != 16 {
		t.Errorf("alternate for port 1: %+v %v", a, ok)
	}
	if _, ok := p.alternate("mlx5_0", 2); ok {
		t.Error("rule for port 1 matched port 2")
	}
	if ok, why := p.allows("mlx5_0", "other", 5); ok || !strings.Contains(why, "comm") {
		t.Errorf("comm not allowed: %v %q", ok, why)
	}
	if ok, _ := p.allows("mlx5_0", "app", 5); !ok {
		t.Error("allowed device and comm refused")
	}
}

func TestPolicyErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"unknown field": {`{"mode":"enforce","allow":{"pids":[1]},"bogus":1}`, "unknown field"},
		"empty allow":   {`{"mode":"enforce"}`, "allowlist allows nothing"},
		"bad mode":      {`{"mode":"yolo","allow":{"pids":[1]}}`, "mode must be"},
		"bad duration":  {`{"grace":"soon","allow":{"pids":[1]}}`, "duration"},
		"bad rate":      {`{"allow":{"pids":[1]},"rate_limit":{"max":0,"per":"1s"}}`, "rate_limit"},
		"alt no port":   {`{"allow":{"pids":[1]},"alternates":[{"device":"d","alt":{"dlid":3}}]}`, "alt.port"},
		"alt bad gid":   {`{"allow":{"pids":[1]},"alternates":[{"device":"d","alt":{"port":1,"dgid":"x"}}]}`, "bad gid"},
	} {
		_, err := ParsePolicy([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if p := DefaultPolicy(); p.Mode != ModeMonitor || p.Validate() == nil {
		t.Errorf("the default policy must be monitor mode and allow nothing: %+v", p)
	}
}

// The example in docs/actuator.md is this file: it must stay valid.
func TestExamplePolicy(t *testing.T) {
	p, err := LoadPolicy("testdata/policy-example.json")
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeMonitor || len(p.Alternates) != 1 {
		t.Errorf("example policy %+v", p)
	}
	doc, err := os.ReadFile("../docs/actuator.md")
	if err != nil {
		t.Fatal(err)
	}
	ex, _ := os.ReadFile("testdata/policy-example.json")
	if !strings.Contains(string(doc), string(ex)) {
		t.Error("docs/actuator.md does not show testdata/policy-example.json verbatim")
	}
}
