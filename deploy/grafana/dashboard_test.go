// Package grafana_test checks the shipped Grafana dashboard: its structure
// and variables, each panel's unit, that its queries are PromQL (promtool
// parses them) and that they name only series, and labels, that apmwatch
// exports (real scrapes of apmwatch audit from the lab, of apmwatch fleet
// and of the publisher; make prom-test compares the audit's with a live
// one too).
package grafana_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/deploy/promcheck"
)

const dashboardFile = "apmwatch-dashboard.json"

// scrapes hold every series the dashboard may query (deploy/prometheus
// checks them against the lab and the code).
var scrapes = []string{"../prometheus/testdata/audit-missed-rearm.prom", "../prometheus/testdata/audit-resolved.prom",
	"../prometheus/testdata/fleet.prom", "../prometheus/testdata/audit-publish.prom"}

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

// labelNames maps each series name of s to its label names.
func labelNames(s promcheck.Scrape) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for k := range s {
		if out[k.Name] == nil {
			out[k.Name] = map[string]bool{}
		}
		for _, l := range strings.Split(k.Labels, ",") {
			if l != "" {
				out[k.Name][l] = true
			}
		}
	}
	return out
}

var (
	selectorRE = regexp.MustCompile(`\b(apmwatch_[a-zA-Z0-9_]*)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	metricRE   = regexp.MustCompile(`\bapmwatch_[a-zA-Z0-9_]*`)
)

// fleetQuery says whether expr is about the fleet's instances, which are
// not hosts: it names their series or their job.
func fleetQuery(expr string) bool {
	return strings.Contains(expr, "apmwatch_fleet_") || strings.Contains(expr, `job="apmwatch-fleet"`)
}

func TestDashboardStructure(t *testing.T) {
	d, err := promcheck.ReadDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 {
		t.Errorf("title %q, uid %q, schemaVersion %d", d.Title, d.UID, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["host"] != "query" || vars["device"] != "query" {
		t.Errorf("template variables %v, want datasource (datasource), host and device (query)", vars)
	}
	labels := labelNames(readScrapes(t))
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d: title %q, %d queries", p.ID, p.Title, len(p.Targets))
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.RefID == "" || refs[q.RefID] || q.Expr == "" {
				t.Errorf("panel %q: query %+v (refId missing or repeated, or no expr)", p.Title, q)
			}
			refs[q.RefID] = true
			switch {
			case fleetQuery(q.Expr) && strings.Contains(q.Expr, "$host"):
				t.Errorf("panel %q: %s is about the fleet's instances, which are no host", p.Title, q.Expr)
			case !fleetQuery(q.Expr) && !strings.Contains(q.Expr, `instance=~"$host"`):
				t.Errorf("panel %q: %s does not follow the host selector", p.Title, q.Expr)
			}
			for _, n := range metricRE.FindAllString(q.Expr, -1) {
				if labels[n]["device"] && !strings.Contains(q.Expr, n+`{device=~"$device"`) {
					t.Errorf("panel %q: %s does not follow the device selector on %s", p.Title, q.Expr, n)
				}
			}
			queries++
		}
	}
	if queries < 25 {
		t.Errorf("%d queries", queries)
	}
}

// dashboardVars replaces this dashboard's variables with values PromQL
// accepts.
var dashboardVars = strings.NewReplacer("$host", ".*", "$device", ".*")

func promQL(expr string) string { return dashboardVars.Replace(promcheck.PromQL(expr)) }

// Every query parses as PromQL: promtool checks them as recording rules.
func TestDashboardPromQL(t *testing.T) {
	d, err := promcheck.ReadDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range d.Exprs() {
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %q\n", i, promQL(e))
	}
	f := filepath.Join(t.TempDir(), "queries.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := promcheck.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(p, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}

// Every query names only series apmwatch exports, and matches only on
// labels they have (or instance and job, which Prometheus adds).
func TestDashboardMetricsExported(t *testing.T) {
	d, err := promcheck.ReadDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	have := readScrapes(t)
	if missing := d.Unexported(have.Names()); len(missing) > 0 {
		t.Errorf("the dashboard queries series apmwatch does not export: %v", missing)
	}
	labels := labelNames(have)
	for _, e := range d.Exprs() {
		for _, sel := range selectorRE.FindAllStringSubmatch(e, -1) {
			for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
				if m[1] != "instance" && m[1] != "job" && !labels[sel[1]][m[1]] {
					t.Errorf("%s: %s has no label %s", e, sel[1], m[1])
				}
			}
		}
	}
}

// unitPanel is what the unit test reads of a panel.
type unitPanel struct {
	Type        string
	Title       string
	Targets     []struct{ RefID, Expr string }
	FieldConfig struct {
		Defaults struct {
			Unit *string
		}
		Overrides []struct {
			Matcher    struct{ ID, Options string }
			Properties []struct {
				ID    string
				Value any
			}
		}
	}
}

// wantUnits is the units a query's values may take: durations in seconds,
// bytes in bytes, rates per second in ops/s (or plain), everything else
// (counts, increases, 0/1 states) plain numbers. A count is never shown
// in seconds.
func wantUnits(expr string) []string {
	names := metricRE.FindAllString(expr, -1)
	all := func(suffix string) bool {
		for _, n := range names {
			if !strings.HasSuffix(n, suffix) {
				return false
			}
		}
		return len(names) > 0
	}
	rate := strings.Contains(expr, "rate(")
	switch {
	case strings.Contains(expr, "histogram_quantile(") && all("_seconds_bucket"):
		return []string{"s"}
	case all("_seconds") && !rate && !strings.Contains(expr, "increase("):
		return []string{"s"}
	case all("_bytes") && !rate:
		return []string{"bytes", "decbytes"}
	case rate:
		return []string{"ops", "short"}
	}
	return []string{"short"}
}

// Every panel says its unit, and each query's unit (the panel's, or an
// override for its refId) fits what the query gives.
func TestDashboardUnits(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Panels []unitPanel }
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.FieldConfig.Defaults.Unit == nil {
			t.Errorf("panel %q: no unit", p.Title)
			continue
		}
		unit := map[string]string{}
		for _, q := range p.Targets {
			unit[q.RefID] = *p.FieldConfig.Defaults.Unit
		}
		for _, o := range p.FieldConfig.Overrides {
			for _, pr := range o.Properties {
				if pr.ID != "unit" {
					continue
				}
				if o.Matcher.ID != "byFrameRefID" {
					t.Errorf("panel %q: a unit override by %s (the test reads byFrameRefID)", p.Title, o.Matcher.ID)
					continue
				}
				if _, ok := unit[o.Matcher.Options]; !ok {
					t.Errorf("panel %q: a unit override for refId %s, which it has not", p.Title, o.Matcher.Options)
				}
				unit[o.Matcher.Options], _ = pr.Value.(string)
			}
		}
		for _, q := range p.Targets {
			if want := wantUnits(q.Expr); !slices.Contains(want, unit[q.RefID]) {
				t.Errorf("panel %q, query %s: unit %q, want one of %v: %s", p.Title, q.RefID, unit[q.RefID], want, q.Expr)
			}
			n++
		}
	}
	if n < 25 {
		t.Errorf("%d queries", n)
	}
}
