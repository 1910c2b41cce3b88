package apm_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
)

// Every kind of the registry is documented in docs/findings.md and, when
// the model decides it, in doc.go's table, by its own rule file with a
// test file of the same name: a kind added to the registry alone fails.
func TestRegistryDocumented(t *testing.T) {
	findings, err := os.ReadFile("../docs/findings.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range apm.Registry() {
		if !strings.Contains(string(findings), "`"+string(k.Kind)+"`") {
			t.Errorf("%s: docs/findings.md does not name it", k.Kind)
		}
		if k.By != apm.ByModel {
			if k.Rule != "" {
				t.Errorf("%s is judged by %s: it has no rule file of the model", k.Kind, k.By)
			}
			continue
		}
		heading := "### `" + string(k.Kind) + "` (" + k.Severity.String() + ") — `apm/" + k.Rule + "`"
		if !strings.Contains(string(findings), heading+"\n") {
			t.Errorf("docs/findings.md has no heading %q", heading)
		}
		test := strings.TrimSuffix(k.Rule, ".go") + "_test.go"
		for _, f := range []string{k.Rule, test} {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s: %v", k.Kind, err)
			}
		}
		if !regexp.MustCompile(`(?m)^//\s+` + regexp.QuoteMeta(string(k.Kind)) + `\s+` + regexp.QuoteMeta(k.Rule) + `$`).Match(doc) {
			t.Errorf("doc.go's table has no line for %s in %s", k.Kind, k.Rule)
		}
	}
}
