package layering

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A wrong-way import planted in the fleet's real packages (a file added
// through go list's overlay, the tree untouched) is what the rules
// reject, with the rule it breaks; without the plant the same packages
// pass.
func TestPlantedWrongWayImportsAreRejected(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, pkgName, imp, want string
	}{
		{"fleet/publish", "publish", module + "/fleet", "fleet/publish imports " + module + "/fleet: the host side (fleet/publish) never imports the judge (fleet)"},
		{"fleet", "fleet", module + "/fleet/publish", "fleet imports " + module + "/fleet/publish: the judge (fleet) never imports the host side's publisher and queue (fleet/publish)"},
		{"fleet/wire", "wire", "github.com/nats-io/nats.go", "fleet/wire imports github.com/nats-io/nats.go: the fleet's protocol (fleet/wire) imports no NATS client"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			dir := t.TempDir()
			planted := filepath.Join(dir, "planted.go")
			if err := os.WriteFile(planted, []byte("package "+c.pkgName+"\n\nimport _ \""+c.imp+"\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, c.dir, "zz_planted.go"): planted}})
			ov := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(ov, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			if got := violations(list(t, module+"/fleet/...")); len(got) != 0 {
				t.Fatalf("the fleet's packages as they are: %v", got)
			}
			got := violations(list(t, "-overlay", ov, module+"/fleet/..."))
			if !slices.Contains(got, c.want) || len(got) != 1 {
				t.Fatalf("with %s importing %s: %q, want only %q", c.dir, c.imp, got, c.want)
			}
		})
	}
}
