// Package promcheck holds what the tests of the shipped Prometheus rules and
// Grafana dashboard share: reading a scrape of apmwatch audit, the metric
// names a query uses, the dashboard's queries, and running promtool.
// Imported by tests only.
package promcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Series is one sample line of a scrape: its name and its label names,
// sorted, without instance and job (which Prometheus adds).
type Series struct {
	Name   string
	Labels string // comma-separated label names
}

// Scrape is a text exposition: every sample's series.
type Scrape map[Series]bool

// Names is every sample name in s (histograms give _bucket, _sum, _count).
func (s Scrape) Names() map[string]bool {
	out := map[string]bool{}
	for k := range s {
		out[k.Name] = true
	}
	return out
}

var seriesRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?`)
var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"(?:[^"\\]|\\.)*"`)

// targetLabels are the labels Prometheus adds to every series of a target
// (a static job's, or Kubernetes service discovery's after the usual
// relabelling), not apmwatch's.
var targetLabels = map[string]bool{"instance": true, "job": true, "namespace": true, "pod": true, "node": true}

// ParseSeries reads `name{label="value",...}` (a sample line or a promtool
// input series); its labels are apmwatch's, without the target's.
func ParseSeries(s string) (Series, error) {
	m := seriesRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Series{}, fmt.Errorf("not a series: %q", s)
	}
	var names []string
	for _, l := range labelRE.FindAllStringSubmatch(m[3], -1) {
		if !targetLabels[l[1]] {
			names = append(names, l[1])
		}
	}
	sort.Strings(names)
	return Series{Name: m[1], Labels: strings.Join(names, ",")}, nil
}

// ParseScrape reads a text exposition.
func ParseScrape(b []byte) (Scrape, error) {
	out := Scrape{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := ParseSeries(line)
		if err != nil {
			return nil, err
		}
		out[s] = true
	}
	return out, sc.Err()
}

// ReadScrape reads a text exposition from a file.
func ReadScrape(path string) (Scrape, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScrape(b)
}

var metricRE = regexp.MustCompile(`\bapmwatch[_:][a-zA-Z0-9_:]*`)

// MetricNames lists the apmwatch series names a PromQL expression uses
// (recording rules' apmwatch:... names included).
func MetricNames(expr string) []string {
	names := metricRE.FindAllString(expr, -1)
	slices.Sort(names)
	return slices.Compact(names)
}

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// Panel is one dashboard panel.
type Panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// ReadDashboard reads a dashboard JSON file, rejecting unknown structure
// only where the tests rely on it.
func ReadDashboard(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// Exprs is every panel query of d.
func (d *Dashboard) Exprs() []string {
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	return out
}

// Grafana's variables, replaced by values PromQL accepts.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$instance", ".*")

// PromQL makes a panel query plain PromQL.
func PromQL(expr string) string { return grafanaVars.Replace(expr) }

// Promtool is the path of Debian's promtool, or an error saying how to get it.
func Promtool() (string, error) {
	p, err := exec.LookPath("promtool")
	if err != nil {
		return "", fmt.Errorf("promtool not found: make setup installs Debian's prometheus package")
	}
	return p, nil
}

// Unexported lists the apmwatch series d's queries name that are not in
// names (a scrape's Names).
func (d *Dashboard) Unexported(names map[string]bool) []string {
	var out []string
	for _, e := range d.Exprs() {
		for _, n := range MetricNames(e) {
			if !names[n] {
				out = append(out, n)
			}
		}
	}
	return out
}
