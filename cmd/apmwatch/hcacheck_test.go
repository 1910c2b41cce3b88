package main

import (
	"strings"
	"testing"
)

// hca-check's flag errors exit 2, a device it cannot use exits 1, each
// with one line.
func TestHCACheckErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"hca-check"}, 2, "--dev is required"},
		{[]string{"hca-check", "--dev", "a/b"}, 2, "not an RDMA device name"},
		{[]string{"hca-check", "--dev", "ibsim0", "--port", "0"}, 2, "--port and --alt-port"},
		{[]string{"hca-check", "--dev", "ibsim0", "--port", "300"}, 2, "invalid argument"},
		{[]string{"hca-check", "--dev", "ibsim0", "--dead-lid", "0"}, 2, "no unicast LID"},
		{[]string{"hca-check", "--dev", "ibsim0", "--retry-cnt", "9"}, 2, "--retry-cnt 9"},
		{[]string{"hca-check", "--dev", "ibsim0", "extra"}, 2, "takes no arguments"},
		{[]string{"hca-check", "--dev", "no-such-hca-check-device"}, 1, "no RDMA device named no-such-hca-check-device"},
	} {
		out, _, err := runErr(c.args...)
		if err == nil || exitCode(err) != c.code || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v (exit %d), want exit %d with one line containing %q", c.args, err, exitCode(err), c.code, c.want)
		}
		if out != "" {
			t.Errorf("%v printed %q", c.args, out)
		}
	}
}
