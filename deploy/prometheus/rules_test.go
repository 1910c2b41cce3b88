// Package prometheus_test checks the shipped alerting and recording rules
// with Debian's promtool: syntax, unit tests on series shaped like a real
// scrape of apmwatch audit, and (make prom-test) a live Prometheus in the
// lab that scrapes a live audit.
package prometheus_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/internal/promcheck"
	"go.yaml.in/yaml/v3"
)

const rulesFile = "apmwatch-rules.yaml"

var scrapes = []string{"testdata/audit-missed-rearm.prom", "testdata/audit-resolved.prom"}

func promtool(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	p, err := promcheck.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

type rules struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Record, Expr string
			For                 string
			Labels              map[string]string
			Annotations         map[string]string
		}
	}
}

func readRules(t *testing.T) rules {
	t.Helper()
	var r rules
	readYAML(t, rulesFile, &r)
	return r
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readScrapes(t *testing.T) promcheck.Scrape {
	t.Helper()
	all := promcheck.Scrape{}
	for _, f := range scrapes {
		s, err := promcheck.ReadScrape(f)
		if err != nil {
			t.Fatal(err)
		}
		for k := range s {
			all[k] = true
		}
	}
	return all
}

func TestRulesCheck(t *testing.T) {
	out := promtool(t, nil, "check", "rules", rulesFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %s", out)
	}
}

// Every alert says how bad it is and what to do; every query names only
// series the daemon exports (or the file's own recording rules).
func TestRulesContent(t *testing.T) {
	r := readRules(t)
	names := readScrapes(t).Names()
	recorded := map[string]bool{}
	alerts := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if rule.Record != "" {
				recorded[rule.Record] = true
			}
		}
	}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			for _, n := range promcheck.MetricNames(rule.Expr) {
				if !names[n] && !recorded[n] {
					t.Errorf("%s%s: %s is neither in a scrape of apmwatch audit nor a recording rule", rule.Alert, rule.Record, n)
				}
			}
			if rule.Alert == "" {
				continue
			}
			alerts++
			if s := rule.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", rule.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if len(rule.Annotations[a]) < 20 {
					t.Errorf("%s: no %s", rule.Alert, a)
				}
			}
		}
	}
	if alerts < 9 {
		t.Errorf("%d alerts, want at least 9", alerts)
	}
}

// The promtool unit tests: testdata/rules-test.yaml gives the input series,
// times, labels and summaries; the static description and runbook of each
// expected alert are taken from the rules file here.
func TestRulesUnit(t *testing.T) {
	static := map[string]map[string]string{}
	for _, g := range readRules(t).Groups {
		for _, rule := range g.Rules {
			if rule.Alert != "" {
				static[rule.Alert] = map[string]string{"description": rule.Annotations["description"], "runbook": rule.Annotations["runbook"]}
			}
		}
	}
	var doc map[string]any
	readYAML(t, "testdata/rules-test.yaml", &doc)
	n := 0
	for _, tc := range doc["tests"].([]any) {
		for _, at := range asList(tc.(map[string]any)["alert_rule_test"]) {
			at := at.(map[string]any)
			for _, ea := range asList(at["exp_alerts"]) {
				ann := ea.(map[string]any)["exp_annotations"].(map[string]any)
				for k, v := range static[at["alertname"].(string)] {
					ann[k] = v
				}
				n++
			}
		}
	}
	dir := t.TempDir()
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rulesFile), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	test := filepath.Join(dir, "rules-test.yaml")
	if err := os.WriteFile(test, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, nil, "test", "rules", test)
	if !strings.Contains(out, "SUCCESS") || n < 10 {
		t.Fatalf("promtool test rules (%d expected alerts): %s", n, out)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// The unit tests' input series have the shape of real ones: each name and
// label set is in a scrape of apmwatch audit from the lab.
func TestRulesSeriesFromScrape(t *testing.T) {
	have := readScrapes(t)
	var doc struct {
		Tests []struct {
			InputSeries []struct{ Series string } `yaml:"input_series"`
		}
	}
	readYAML(t, "testdata/rules-test.yaml", &doc)
	n := 0
	for _, tc := range doc.Tests {
		for _, in := range tc.InputSeries {
			s, err := promcheck.ParseSeries(in.Series)
			if err != nil {
				t.Fatal(err)
			}
			if !have[s] {
				t.Errorf("input series %s: no series %s{%s} in %v", in.Series, s.Name, s.Labels, scrapes)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no input series")
	}
}
