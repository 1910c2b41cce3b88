package actuator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The source path bits of an address vector are a 7-bit field (the low
// bits of the SLID, IBTA ah_attr.src_path_bits), and the HCA keeps only
// the low LMC bits of them (the port answers to 2^LMC LIDs from its LID).
// Bits the port's LMC masks off make the "alternate" the primary's own
// route: such an alternate is refused, never sent.

// maxPathBits is the largest value of the 7-bit field.
const maxPathBits = 127

// checkPathBitsField refuses bits outside the 7-bit field.
func checkPathBitsField(bits uint8) error {
	if bits > maxPathBits {
		return fmt.Errorf("src_path_bits must be 0-%d (a 7-bit field), not %d", maxPathBits, bits)
	}
	return nil
}

// maxLMC is the largest LID mask count (IBTA: 3 bits, 0-7).
const maxLMC = 7

// lmc reads /sys/class/infiniband/DEV/ports/N/lid_mask_count; ok false when
// the port is not there or the file does not hold 0-7.
func (r roots) lmc(device string, port uint8) (int, bool) {
	if device == "" || strings.ContainsAny(device, "/\x00") || device == "." || device == ".." {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(r.ib, device, "ports", strconv.Itoa(int(port)), "lid_mask_count"))
	if err != nil || len(b) > 16 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > maxLMC {
		return 0, false
	}
	return n, true
}

// checkLMC refuses path bits the port's LMC would mask off (bits must be
// below 2^LMC). A port whose LMC cannot be read is not judged (false, nil):
// the caller says so where it matters.
func (r roots) checkLMC(device string, port uint8, bits uint8) (checked bool, err error) {
	lmc, ok := r.lmc(device, port)
	if !ok {
		return false, nil
	}
	if int(bits) >= 1<<lmc {
		return true, fmt.Errorf("src_path_bits %d is outside the LMC of %s port %d (lid_mask_count %d: bits below %d): the HCA would mask them and the alternate would be another path's route",
			bits, device, port, lmc, 1<<lmc)
	}
	return true, nil
}

// CheckPorts compares the policy's alternates with this host's ports, as
// sysfs shows them: path bits outside a port's LMC are refused (one line).
// It returns the alternates it could not check (their device or port is
// not on this host), for the caller to mention.
func (p Policy) CheckPorts() (unchecked []string, err error) {
	return p.checkPorts(sysRoots)
}

func (p Policy) checkPorts(r roots) ([]string, error) {
	var unchecked, errs []string
	for i, rule := range p.Alternates {
		a := rule.Alt
		checked, err := r.checkLMC(rule.Device, a.Port, a.PathBits)
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("alternates[%d]: %v", i, err))
		case !checked:
			unchecked = append(unchecked, fmt.Sprintf("alternates[%d] (%s port %d)", i, rule.Device, a.Port))
		}
	}
	if len(errs) > 0 {
		return unchecked, errors.New("policy: " + strings.Join(errs, "; "))
	}
	return unchecked, nil
}
