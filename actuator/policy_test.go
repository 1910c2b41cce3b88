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
  "alternates": [{"device": "mlx5_0", "port": 1, "alt": {"port": 2, "dlid": 7, "timeout": 16, "src_path_bits": 1}}],
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
	if !ok || a.Port != 2 || a.Dest.PortNum != 2 || a.Dest.DLID != 7 || a.Dest.SrcPathBits != 1 || a.Timeout != 16 {
		t.Errorf("alternate for port 1: %+v %v", a, ok)
	}
	if _, ok := p.alternate("mlx5_0", 2); ok {
		t.Error("rule for port 1 matched port 2")
	}
	if ok, why := p.allows("mlx5_0", Owner{Comm: "other", PID: 5}); ok || !strings.Contains(why, "comm") {
		t.Errorf("comm not allowed: %v %q", ok, why)
	}
	if ok, _ := p.allows("mlx5_0", Owner{Comm: "app", PID: 5}); !ok {
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
		"rate too high": {`{"allow":{"pids":[1]},"rate_limit":{"max":1000000,"per":"1m"}}`, "rate_limit.max must be between 1 and 10000"},
		"period short":  {`{"allow":{"pids":[1]},"rate_limit":{"max":5,"per":"1ms"}}`, "rate_limit.per must be between 1s and 24h0m0s"},
		"period long":   {`{"allow":{"pids":[1]},"rate_limit":{"max":5,"per":"720h"}}`, "rate_limit.per"},
		"owner > max":   {`{"allow":{"pids":[1]},"rate_limit":{"max":5,"per":"1m","owner_max":6}}`, "owner_max"},
		"grace long":    {`{"allow":{"pids":[1]},"grace":"100h"}`, "grace must be between"},
		"trailing":      {`{"allow":{"pids":[1]}} {"mode":"enforce"}`, "data after the policy object"},
		"trailing junk": {`{"allow":{"pids":[1]}}x`, "data after"},
		"duplicate":     {`{"allow":{"pids":[1]},"mode":"monitor","mode":"enforce"}`, `duplicate key "mode" in the policy`},
		"dup folded":    {`{"allow":{"pids":[1]},"mode":"monitor","MODE":"enforce"}`, `duplicate key "MODE"`},
		"dup nested":    {`{"allow":{"pids":[1],"comms":["a"],"pids":[2]}}`, `duplicate key "pids" in allow`},
		"dup in list":   {`{"allow":{"pids":[1]},"alternates":[{"device":"d","device":"e","alt":{"port":1,"dlid":2}}]}`, `duplicate key "device" in alternates[]`},
		"not object":    {`[1]`, "cannot unmarshal"},
		"empty":         {``, "empty policy"},
		"deep":          {strings.Repeat("[", 40) + strings.Repeat("]", 40), "nested deeper"},
		"cgroup rel":    {`{"allow":{"cgroups":["system.slice"]}}`, "not an absolute cgroup path"},
		"unit slash":    {`{"allow":{"units":["a/b.service"]}}`, "not a systemd unit name"},
		"pod bad":       {`{"allow":{"pods":["../x"]}}`, "not a pod uid"},
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
	// the packages' example loads, and acts on nothing
	p, err = LoadPolicy("../deploy/package/etc/apmwatch/policy.json.example")
	if err != nil || p.Mode != ModeMonitor {
		t.Errorf("the packaged example policy: %+v %v, want monitor mode", p, err)
	}
	// a missing file says what it is
	if _, err := LoadPolicy("testdata/missing.json"); err == nil || !strings.HasPrefix(err.Error(), "reading policy: ") {
		t.Errorf("a missing policy: %v", err)
	}
}

// The --enforce flag is the one switch: "enforce" in the file alone stays
// monitor and says so.
func TestEffectiveMode(t *testing.T) {
	p, err := ParsePolicy([]byte(goodPolicy))
	if err != nil {
		t.Fatal(err)
	}
	got, warn := p.Effective(false)
	if got.Mode != ModeMonitor || !strings.Contains(warn, "--enforce was not given") {
		t.Errorf("file enforce, no flag: mode %s, warning %q", got.Mode, warn)
	}
	if got, warn = p.Effective(true); got.Mode != ModeEnforce || warn != "" {
		t.Errorf("with the flag: mode %s, warning %q", got.Mode, warn)
	}
	p.Mode = ModeMonitor
	if got, warn = p.Effective(true); got.Mode != ModeEnforce || warn != "" {
		t.Errorf("monitor file with the flag: mode %s, warning %q", got.Mode, warn)
	}
	if got, warn = p.Effective(false); got.Mode != ModeMonitor || warn != "" {
		t.Errorf("monitor file, no flag: mode %s, warning %q", got.Mode, warn)
	}
}

func TestAllowOwnerUIDAndCgroup(t *testing.T) {
	svc := Owner{PID: 7, Comm: "app", UIDs: []uint32{1000, 1000, 1000}, Cgroup: "/system.slice/app.service"}
	pod := Owner{PID: 8, Comm: "app", UIDs: []uint32{0, 0, 0},
		Cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_0000_4000_8000_000000000001.slice/cri-containerd-ab12.scope"}
	podfs := Owner{PID: 9, Comm: "app", Cgroup: "/kubepods/besteffort/pod1b2c3d4e-0000-4000-8000-000000000001/ab12"}
	setuid := Owner{PID: 10, Comm: "app", UIDs: []uint32{1000, 0, 0}, Cgroup: "/user.slice/user-1000.slice/session-1.scope"}
	for _, tc := range []struct {
		allow Allow
		o     Owner
		ok    bool
		why   string
	}{
		{Allow{UIDs: []uint32{1000}}, svc, true, ""},
		{Allow{UIDs: []uint32{1000}}, setuid, false, "not all in allow.uids"},
		{Allow{UIDs: []uint32{1000}}, Owner{PID: 1}, false, "uid unknown"},
		{Allow{Cgroups: []string{"/system.slice/app.service"}}, svc, true, ""},
		{Allow{Cgroups: []string{"/system.slice"}}, svc, true, ""},
		{Allow{Cgroups: []string{"/system.slice/app"}}, svc, false, "allow.cgroups"},
		{Allow{Units: []string{"app.service"}}, svc, true, ""},
		{Allow{Units: []string{"app.service"}}, pod, false, "allow.units"},
		{Allow{Pods: []string{"1B2C3D4E-0000-4000-8000-000000000001"}}, pod, true, ""},
		{Allow{Pods: []string{"1b2c3d4e-0000-4000-8000-000000000001"}}, podfs, true, ""},
		{Allow{Pods: []string{"1b2c3d4e-0000-4000-8000-000000000002"}}, pod, false, "allow.pods"},
		{Allow{Pods: []string{"1b2c3d4e-0000-4000-8000-000000000001"}}, svc, false, "allow.pods"},
		// Every list must match: the right comm in the wrong unit is refused.
		{Allow{Comms: []string{"app"}, Units: []string{"app.service"}}, setuid, false, "allow.units"},
	} {
		p := Policy{Allow: tc.allow}
		ok, why := p.allows("mlx5_0", tc.o)
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("allow %+v owner %+v: %v %q, want %v %q", tc.allow, tc.o, ok, why, tc.ok, tc.why)
		}
	}
}
