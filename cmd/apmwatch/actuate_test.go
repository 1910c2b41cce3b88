package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/audit"
	"github.com/spf13/cobra"
)

// --enforce is the one switch: a policy file saying "enforce" without it
// monitors, with a warning on stderr.
func TestPolicyEnforceNeedsTheFlag(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"mode":"enforce","allow":{"comms":["app"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		mode string
		warn bool
	}{
		{[]string{"--policy", policy}, actuator.ModeMonitor, true},
		{[]string{"--policy", policy, "--enforce"}, actuator.ModeEnforce, false},
	} {
		var cfg audit.Config
		var stderr bytes.Buffer
		cmd := &cobra.Command{Use: "audit", RunE: func(*cobra.Command, []string) error { return nil }}
		cmd.SetErr(&stderr)
		enforceAudit(cmd, &cfg)
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := cmd.PreRunE(cmd, nil); err != nil {
			t.Fatal(err)
		}
		e, ok := cfg.Actor.(*actuator.Enforcer)
		if !ok || e.Policy.Mode != tc.mode {
			t.Errorf("%v: actor %T %+v, want mode %s", tc.args, cfg.Actor, cfg.Actor, tc.mode)
			continue
		}
		if got := strings.Contains(stderr.String(), "--enforce was not given: monitor mode"); got != tc.warn {
			t.Errorf("%v: warning %v, stderr %q", tc.args, got, stderr.String())
		}
	}
}
