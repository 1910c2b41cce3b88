// Package prometheus_test checks the shipped alerting and recording rules
// with Debian's promtool: syntax, unit tests on series shaped like a real
// scrape of apmwatch audit, of apmwatch fleet and of the publisher, an
// alert and a runbook for every kind that needs one, and (make prom-test)
// a live Prometheus in the lab that scrapes a live audit.
package prometheus_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/deploy/promcheck"
	"go.yaml.in/yaml/v3"
)

const (
	rulesFile = "apmwatch-rules.yaml"
	rulesTest = "testdata/rules-test.yaml"
	runbooks  = "../../docs/runbooks.md"
	// runbookURL is where every alert's runbook_url points: a heading of
	// docs/runbooks.md.
	runbookURL = "https://github.com/apmwatch/apmwatch/blob/main/docs/runbooks.md#"
)

// scrapes are the lab's scrapes of apmwatch audit (make prom-test
// compares them with live ones); allScrapes adds the series of `apmwatch
// fleet` and `apmwatch audit --publish` (TestServiceScrapes compares them
// with the code's).
var (
	scrapes    = []string{"testdata/audit-missed-rearm.prom", "testdata/audit-resolved.prom"}
	allScrapes = append([]string{fleetScrape, publishScrape}, scrapes...)
)

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

func readScrapes(t *testing.T, files []string) promcheck.Scrape {
	t.Helper()
	all := promcheck.Scrape{}
	for _, f := range files {
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

// Every alert says how bad it is and what to do, with its runbook in
// docs/runbooks.md; every query names only series the daemons export (or
// the file's own recording rules), and selects on labels those series have.
func TestRulesContent(t *testing.T) {
	r := readRules(t)
	have := readScrapes(t, allScrapes)
	names := have.Names()
	recorded := map[string]bool{}
	alerts := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if rule.Record != "" {
				recorded[rule.Record] = true
			}
		}
	}
	sections := runbookSections(t)
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			for _, n := range promcheck.MetricNames(rule.Expr) {
				if !names[n] && !recorded[n] {
					t.Errorf("%s%s: %s is neither in a scrape of apmwatch (testdata/*.prom) nor a recording rule", rule.Alert, rule.Record, n)
				}
			}
			for _, e := range unknownLabels(rule.Expr, have) {
				t.Errorf("%s%s: %s", rule.Alert, rule.Record, e)
			}
			if rule.Alert == "" {
				continue
			}
			alerts++
			if s := rule.Labels["severity"]; s != "critical" && s != "error" && s != "warning" {
				t.Errorf("%s: severity %q, want critical, error or warning (a finding's)", rule.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if len(rule.Annotations[a]) < 20 {
					t.Errorf("%s: no %s", rule.Alert, a)
				}
			}
			u := rule.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(u, runbookURL)
			if !ok || anchor != strings.ToLower(rule.Alert) {
				t.Errorf("%s: runbook_url %q, want %s%s", rule.Alert, u, runbookURL, strings.ToLower(rule.Alert))
				continue
			}
			text, ok := sections[anchor]
			if !ok {
				t.Errorf("%s: no heading %s in %s", rule.Alert, rule.Alert, runbooks)
				continue
			}
			delete(sections, anchor)
			for _, part := range []string{"**What it means.**", "**What to check.**", "**What to do.**"} {
				if !strings.Contains(text, part) {
					t.Errorf("%s: its runbook in %s has no %s", rule.Alert, runbooks, part)
				}
			}
		}
	}
	for anchor := range sections {
		if strings.HasPrefix(anchor, "apmwatch") {
			t.Errorf("%s: runbook %s of no alert", runbooks, anchor)
		}
	}
	if alerts < 20 {
		t.Errorf("%d alerts, want at least 20", alerts)
	}
}

// runbookSections reads docs/runbooks.md: each heading's GitHub anchor
// and the text under it, up to the next heading.
func runbookSections(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(runbooks)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	anchor := ""
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			anchor = githubAnchor(h)
			out[anchor] = ""
			continue
		}
		if anchor != "" {
			out[anchor] += line + "\n"
		}
	}
	return out
}

var notAnchor = regexp.MustCompile(`[^a-z0-9 _-]`)

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	return strings.ReplaceAll(notAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
}

var (
	selectorRE = regexp.MustCompile(`\b(apmwatch_[a-zA-Z0-9_]*)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
)

// matcher is one label matcher of a selector.
type matcher struct{ Label, Op, Value string }

// selector is an apmwatch series selector of a query: `name{matchers}`.
type selector struct {
	Name     string
	Matchers []matcher
}

// selectors lists the apmwatch series selectors with braces in expr.
func selectors(expr string) []selector {
	var out []selector
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		sel := selector{Name: m[1]}
		for _, l := range matcherRE.FindAllStringSubmatch(m[2], -1) {
			sel.Matchers = append(sel.Matchers, matcher{l[1], l[2], l[3]})
		}
		out = append(out, sel)
	}
	return out
}

// unknownLabels says which selectors of expr match on a label that no
// series of their name has in have (instance and job come from
// Prometheus).
func unknownLabels(expr string, have promcheck.Scrape) []string {
	labels := map[string]map[string]bool{}
	for s := range have {
		if labels[s.Name] == nil {
			labels[s.Name] = map[string]bool{"instance": true, "job": true}
		}
		for _, l := range strings.Split(s.Labels, ",") {
			labels[s.Name][l] = true
		}
	}
	var out []string
	for _, sel := range selectors(expr) {
		for _, m := range sel.Matchers {
			if labels[sel.Name] != nil && !labels[sel.Name][m.Label] {
				out = append(out, sel.Name+" has no label "+m.Label)
			}
		}
	}
	return out
}

// matches says whether m keeps the label value v.
func (m matcher) matches(v string) bool {
	switch m.Op {
	case "=":
		return v == m.Value
	case "!=":
		return v != m.Value
	}
	re, err := regexp.Compile("^(?:" + m.Value + ")$")
	if err != nil {
		return false
	}
	return re.MatchString(v) == (m.Op == "=~")
}

// selects says whether a selector's matchers keep a series with these
// labels (a label not among them reads as "", as in PromQL).
func selects(ms []matcher, labels map[string]string) bool {
	for _, m := range ms {
		if !m.matches(labels[m.Label]) {
			return false
		}
	}
	return true
}

// findingSeries is the series a new finding of k counts in, and the
// labels that select it: the audit counts the kinds of the model and the
// actuator (and keeps the open ones), the fleet the kinds judged from both
// ends of a connection.
func findingSeries(k apm.KindInfo) (names []string, labels map[string]string) {
	switch k.By {
	case apm.ByFleet, apm.ByPairing:
		return []string{"apmwatch_fleet_findings_total"}, map[string]string{"kind": string(k.Kind), "type": "finding"}
	}
	return []string{"apmwatch_findings_total", "apmwatch_open_findings"}, map[string]string{"kind": string(k.Kind), "severity": k.Severity.String()}
}

// Every critical and error kind of the registry, and every kind the fleet
// gives, has an alert that selects its findings' series, as severe as the
// kind when it is critical; and a unit test in testdata/rules-test.yaml
// shows that alert firing on a series of that kind. A new kind cannot ship
// without its alert.
func TestEveryKindHasAnAlert(t *testing.T) {
	r := readRules(t)
	fires := firingInputs(t)
	needed := 0
	for _, k := range apm.Registry() {
		if k.Severity < apm.SevError && k.By != apm.ByFleet && k.By != apm.ByPairing {
			continue
		}
		needed++
		names, labels := findingSeries(k)
		covered := false
		for _, g := range r.Groups {
			for _, rule := range g.Rules {
				if rule.Alert == "" {
					continue
				}
				for _, sel := range selectors(rule.Expr) {
					if !slices.Contains(names, sel.Name) || !hasLabel(sel.Matchers, "kind") || !selects(sel.Matchers, labels) {
						continue
					}
					covered = true
					if rule.Labels["severity"] != k.Severity.String() {
						t.Errorf("%s (%s): %s has severity %q, want the finding's", k.Kind, k.Severity, rule.Alert, rule.Labels["severity"])
					}
					if !fires[rule.Alert][string(k.Kind)] {
						t.Errorf("%s: no unit test in %s shows %s firing on a series of kind %s", k.Kind, rulesTest, rule.Alert, k.Kind)
					}
					break
				}
			}
		}
		if !covered {
			t.Errorf("kind %s (%s, judged by %s) has no alert: add one on %s{kind=%q} to %s, its unit test and its runbook",
				k.Kind, k.Severity, k.By, names[0], k.Kind, rulesFile)
		}
	}
	if needed < 8 {
		t.Errorf("%d kinds need an alert: the registry changed shape?", needed)
	}
}

func hasLabel(ms []matcher, label string) bool {
	for _, m := range ms {
		if m.Label == label {
			return true
		}
	}
	return false
}

// ruleTests is testdata/rules-test.yaml as the Go tests read it.
type ruleTests struct {
	Tests []struct {
		InputSeries   []struct{ Series string } `yaml:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	}
}

// firingInputs maps each alert to the kinds of the input series of the
// unit tests in which it is expected to fire.
func firingInputs(t *testing.T) map[string]map[string]bool {
	t.Helper()
	var doc ruleTests
	readYAML(t, rulesTest, &doc)
	kindRE := regexp.MustCompile(`\bkind="([^"]*)"`)
	out := map[string]map[string]bool{}
	for _, tc := range doc.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) == 0 {
				continue
			}
			if out[at.Alertname] == nil {
				out[at.Alertname] = map[string]bool{}
			}
			for _, in := range tc.InputSeries {
				if m := kindRE.FindStringSubmatch(in.Series); m != nil {
					out[at.Alertname][m[1]] = true
				}
			}
		}
	}
	return out
}

// The promtool unit tests, run as they are (make prom-rules-test runs the
// same): each alert of the rules file is expected to fire at some
// evaluation and to be quiet at another.
func TestRulesUnit(t *testing.T) {
	var doc ruleTests
	readYAML(t, rulesTest, &doc)
	fired, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range doc.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fired[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, g := range readRules(t).Groups {
		for _, rule := range g.Rules {
			if rule.Alert != "" && (!fired[rule.Alert] || !quiet[rule.Alert]) {
				t.Errorf("%s: %s expects it firing at some evaluation: %v, and quiet at another: %v", rule.Alert, rulesTest, fired[rule.Alert], quiet[rule.Alert])
			}
		}
	}
	out := promtool(t, nil, "test", "rules", rulesTest)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}
}

// The unit tests' input series have the shape of real ones: each name and
// label set is in a scrape of apmwatch, or is the `up` Prometheus gives
// every target.
func TestRulesSeriesFromScrape(t *testing.T) {
	have := readScrapes(t, allScrapes)
	var doc ruleTests
	readYAML(t, rulesTest, &doc)
	n := 0
	for _, tc := range doc.Tests {
		for _, in := range tc.InputSeries {
			s, err := promcheck.ParseSeries(in.Series)
			if err != nil {
				t.Fatal(err)
			}
			if !have[s] && s != (promcheck.Series{Name: "up"}) {
				t.Errorf("input series %s: no series %s{%s} in %v", in.Series, s.Name, s.Labels, allScrapes)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no input series")
	}
}
