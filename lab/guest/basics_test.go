//go:build labguest

// These tests need root inside the lab guest (make lab-test): the RDMA
// modules, the apmlab module, rxe0/rxe1 and the lab programs on PATH.
package guest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestModulesLoaded(t *testing.T) {
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			loaded[f[0]] = true
		}
	}
	for _, m := range []string{"ib_core", "ib_uverbs", "ib_umad", "ib_cm", "rdma_cm", "rdma_ucm", "rdma_rxe", "apmlab", "ibsim"} {
		if !loaded[m] {
			t.Errorf("module %s is not in /proc/modules", m)
		}
	}
	for _, f := range []string{"inject", "ulp", "log"} {
		if _, err := os.Stat("/sys/kernel/debug/apmlab/" + f); err != nil {
			t.Errorf("apmlab control file: %v", err)
		}
	}
}

func TestRxePortsActive(t *testing.T) {
	for _, dev := range []string{"rxe0", "rxe1"} {
		b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/state")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ACTIVE") {
			t.Errorf("%s port 1 state %q, want ACTIVE", dev, strings.TrimSpace(string(b)))
		}
	}
}

func TestInjectErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--dev", "rxe0", "--qpn", "999999", "--event", "path_mig"}, 1, "no QP 999999 on rxe0"},
		{[]string{"--dev", "nosuchdev", "--qpn", "17", "--event", "path_mig"}, 1, "no RDMA device named nosuchdev"},
		{[]string{"--dev", "rxe0", "--qpn", "17", "--event", "no_such_event"}, 2, "unknown event"},
		{[]string{"--dev", "rxe0", "--event", "path_mig"}, 2, "required"},
	}
	for _, c := range cases {
		r := Run(t, "lab-inject", c.args...)
		if r.Code != c.code || !strings.Contains(r.Stderr, c.msg) {
			t.Errorf("lab-inject %v: exit %d stderr %q, want exit %d and %q", c.args, r.Code, r.Stderr, c.code, c.msg)
		}
		if len(r.Lines) != 0 {
			t.Errorf("lab-inject %v printed %v on stdout on error", c.args, r.Lines)
		}
	}
}

func TestProgramsHaveHelp(t *testing.T) {
	for _, p := range []string{"lab-inject", "lab-pair", "lab-cm-pair", "lab-ulp", "lab-lap", "lab-ib", "lab-ibpair", "lab-mpi", "lab-verbs"} {
		out, err := exec.Command(p, "--help").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "usage: "+p) {
			t.Errorf("%s --help: %v, output %q", p, err, out)
		}
	}
}
