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

// policy-check refuses path bits outside the 7-bit field with one line.
func TestPolicyCheckRefusesPathBits(t *testing.T) {
	dir := t.TempDir()
	for bits, ok := range map[string]bool{"128": false, "255": false, "0": true} {
		path := filepath.Join(dir, "policy-"+bits+".json")
		doc := `{"allow":{"comms":["x"]},"alternates":[{"device":"mlx5_test9","alt":{"port":1,"dlid":5,"src_path_bits":` + bits + `}}]}`
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := run("actuate", "policy-check", path)
		if ok != (err == nil) {
			t.Errorf("src_path_bits %s: %v", bits, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "0-127") || strings.Contains(err.Error(), "\n")) {
			t.Errorf("src_path_bits %s: not one line naming the field's range: %q", bits, err)
		}
	}
}
