// Package grafana_test checks the shipped Grafana dashboard: its structure,
// that its queries are PromQL (promtool parses them) and that they name only
// series apmwatch audit exports (a real scrape from the lab; make prom-test
// compares them with a live one too).
package grafana_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/internal/promcheck"
)

const dashboardFile = "apmwatch-dashboard.json"

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
	if vars["datasource"] != "datasource" || vars["instance"] != "query" {
		t.Errorf("template variables %v, want datasource (datasource) and instance (query)", vars)
	}
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
			if !strings.Contains(q.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q: %s does not follow the host selector", p.Title, q.Expr)
			}
			queries++
		}
	}
	if queries < 10 {
		t.Errorf("%d queries", queries)
	}
}

// Every query parses as PromQL: promtool checks them as recording rules.
func TestDashboardPromQL(t *testing.T) {
	d, err := promcheck.ReadDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range d.Exprs() {
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %q\n", i, promcheck.PromQL(e))
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

func TestDashboardMetricsExported(t *testing.T) {
	d, err := promcheck.ReadDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range []string{"../prometheus/testdata/audit-missed-rearm.prom", "../prometheus/testdata/audit-resolved.prom"} {
		s, err := promcheck.ReadScrape(f)
		if err != nil {
			t.Fatal(err)
		}
		for n := range s.Names() {
			names[n] = true
		}
	}
	if missing := d.Unexported(names); len(missing) > 0 {
		t.Errorf("the dashboard queries series apmwatch audit does not export: %v", missing)
	}
}
