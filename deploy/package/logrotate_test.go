package package_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The logrotate file rotates the finding logs the packaged daemons write,
// each reopened by its daemon on SIGHUP (systemctl reload sends it).
func TestLogrotate(t *testing.T) {
	b, err := os.ReadFile("etc/logrotate.d/apmwatch")
	if err != nil {
		t.Fatal(err)
	}
	stanzas := map[string]string{}
	for _, m := range regexp.MustCompile(`(?ms)^(/\S+) \{\n(.*?)^\}`).FindAllStringSubmatch(string(b), -1) {
		stanzas[m[1]] = m[2]
	}
	for file, want := range map[string][]string{
		"apmwatch.default":       {"postrotate", "systemctl reload apmwatch-audit.service", "endscript"},
		"apmwatch-fleet.default": {"postrotate", "systemctl reload apmwatch-fleet.service", "endscript"},
	} {
		d, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^APMWATCH_[A-Z]+_ARGS=".*--findings (/\S+)[ "]`).FindSubmatch(d)
		if m == nil {
			t.Fatalf("%s: no --findings", file)
		}
		s, ok := stanzas[string(m[1])]
		if !ok {
			t.Errorf("logrotate: no stanza for %s (%s's finding log)", m[1], file)
			continue
		}
		for _, w := range append(want, "missingok", "rotate ") {
			if !strings.Contains(s, w) {
				t.Errorf("logrotate %s: no %q", m[1], w)
			}
		}
	}
	// Each unit's reload is the SIGHUP that reopens the log.
	for _, unit := range []string{"apmwatch-audit.service", "apmwatch-fleet.service"} {
		if u, _ := os.ReadFile("../" + unit); !strings.Contains(string(u), "\nExecReload=/bin/kill -HUP $MAINPID\n") {
			t.Errorf("%s: reload does not send SIGHUP", unit)
		}
	}
}
