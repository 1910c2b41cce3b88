package hcacheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The raw backend finds uverbsN by its ibdev file and says so when none
// matches; nothing is written before the device is open.
func TestRawOpenFindsNode(t *testing.T) {
	sys := t.TempDir()
	r := NewRaw(sys, t.TempDir())
	if err := r.Open("ibsim0"); err == nil || !strings.Contains(err.Error(), "no uverbs devices") {
		t.Errorf("no infiniband_verbs: %v", err)
	}
	for node, dev := range map[string]string{"uverbs0": "rxe0", "uverbs1": "ibsim0"} {
		d := filepath.Join(sys, "class", "infiniband_verbs", node)
		must(t, os.MkdirAll(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "ibdev"), []byte(dev+"\n"), 0o644))
	}
	if n, err := uverbsNode(sys, "ibsim0"); n != "uverbs1" || err != nil {
		t.Errorf("node %q %v", n, err)
	}
	if _, err := uverbsNode(sys, "ibsim1"); err == nil || !strings.Contains(err.Error(), "ibsim1 has no uverbs device") {
		t.Errorf("ibsim1: %v", err)
	}
	// The node exists in sysfs but not under the /dev root given.
	if err := r.Open("ibsim0"); err == nil || !strings.Contains(err.Error(), "uverbs1") {
		t.Errorf("open without a device file: %v", err)
	}
	if _, err := r.AllocPD(); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("ALLOC_PD on a closed backend: %v", err)
	}
	if _, _, err := r.NextEvent(time.Millisecond); err == nil {
		t.Error("NextEvent on a closed backend")
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
}
