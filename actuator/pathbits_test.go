package actuator

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// withLMC writes rxe0 port 1's lid_mask_count into the fixture roots.
func withLMC(t *testing.T, r roots, lmc string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.ib, "rxe0", "ports", "1", "lid_mask_count"), []byte(lmc), 0o644); err != nil {
		t.Fatal(err)
	}
}

func policyWithBits(bits int) string {
	return `{"mode":"enforce","allow":{"comms":["x"]},"rate_limit":{"max":1,"per":"1m"},
		"alternates":[{"device":"rxe0","alt":{"port":1,"dlid":5,"src_path_bits":` + strconv.Itoa(bits) + `}}]}`
}

// src_path_bits is a 7-bit field: 128 and 255 are refused in one line.
func TestPathBitsFieldRefused(t *testing.T) {
	for _, bits := range []int{128, 200, 255} {
		_, err := ParsePolicy([]byte(policyWithBits(bits)))
		if err == nil || !strings.Contains(err.Error(), "src_path_bits must be 0-127") || strings.Contains(err.Error(), "\n") {
			t.Errorf("src_path_bits %d: %v", bits, err)
		}
	}
	if _, err := ParsePolicy([]byte(policyWithBits(127))); err != nil {
		t.Errorf("src_path_bits 127: %v", err)
	}
	f := AltFlags{Port: 1, DLID: 5, PathBits: 128}
	if _, err := f.Path(func(string) bool { return true }); err == nil {
		t.Error("--alt-src-path-bits 128 accepted")
	}
}

// At load, path bits are compared with the port's LMC where sysfs has the
// port: bits at or over 2^LMC are refused, a port not on the host is
// listed as not checked.
func TestPolicyPathBitsWithinLMC(t *testing.T) {
	r := fixtureRoots(t, "InfiniBand")
	withLMC(t, r, "2\n") // 4 paths: bits 0-3
	for bits, ok := range map[int]bool{0: true, 3: true, 4: false, 7: false, 127: false} {
		p, err := ParsePolicy([]byte(policyWithBits(bits)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.checkPorts(r)
		if ok != (err == nil) {
			t.Errorf("bits %d under LMC 2: %v", bits, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "lid_mask_count 2") || strings.Contains(err.Error(), "\n")) {
			t.Errorf("bits %d: not one line naming the LMC: %v", bits, err)
		}
	}
	withLMC(t, r, "0\n") // one LID: only bits 0
	p, _ := ParsePolicy([]byte(policyWithBits(1)))
	if _, err := p.checkPorts(r); err == nil {
		t.Error("bits 1 under LMC 0 accepted")
	}
	p.Alternates[0].Device = "mlx5_9"
	if un, err := p.checkPorts(r); err != nil || len(un) != 1 || !strings.Contains(un[0], "mlx5_9 port 1") {
		t.Errorf("a device not on the host: unchecked %v, %v", un, err)
	}
	withLMC(t, r, "junk")
	p.Alternates[0].Device = "rxe0"
	if un, err := p.checkPorts(r); err != nil || len(un) != 1 {
		t.Errorf("an unreadable lid_mask_count: unchecked %v, %v", un, err)
	}
}

// At action time the actuator reads the port's LMC again before it sends:
// an alternate whose bits the HCA would mask is refused, nothing sent.
func TestActionRefusesPathBitsOutsideLMC(t *testing.T) {
	a, b, tg, f, _ := setup(t, event.MigMigrated, "InfiniBand")
	withLMC(t, a.roots, "1\n")
	err := a.act(&Request{Op: OpRearm, Alt: &AltPath{Port: 1, Dest: Dest{DLID: 3, PortNum: 1, SrcPathBits: 2}}}, b, tg, &Result{})
	if !errors.Is(err, ErrBadAlt) || !strings.Contains(err.Error(), "lid_mask_count 1") {
		t.Fatalf("bits 2 under LMC 1: %v", err)
	}
	if len(f.modifies) != 0 {
		t.Fatalf("sent %+v", f.modifies)
	}
	err = a.act(&Request{Op: OpLoadAlt, Alt: &AltPath{Port: 1, Dest: Dest{DLID: 3, PortNum: 1, SrcPathBits: 200}}}, b, tg, &Result{})
	if !errors.Is(err, ErrBadAlt) || len(f.modifies) != 0 {
		t.Fatalf("bits 200: %v, sent %+v", err, f.modifies)
	}
	if err := a.act(&Request{Op: OpRearm, Alt: &AltPath{Port: 1, Dest: Dest{DLID: 3, PortNum: 1, SrcPathBits: 1}}}, b, tg, &Result{}); err != nil {
		t.Fatalf("bits 1 under LMC 1: %v", err)
	}
	if len(f.modifies) == 0 {
		t.Fatal("nothing sent for a path within the LMC")
	}
}
