package apm

import "testing"

// Every severity reads back by its name; anything else is refused.
func TestParseSeverity(t *testing.T) {
	for s := SevInfo; s <= SevCritical; s++ {
		got, err := ParseSeverity(s.String())
		if err != nil || got != s {
			t.Errorf("%s: %v %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "fatal", "Error", "severity(4)"} {
		if _, err := ParseSeverity(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
