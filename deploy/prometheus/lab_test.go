package prometheus_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/deploy/promcheck"
)

// labBlocks splits the output of testdata/lab/e2e.sh into its
// "=== BEGIN NAME ===" ... "=== END NAME ===" blocks.
func labBlocks(t *testing.T, path string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	begin := regexp.MustCompile(`^=== BEGIN (\S+) ===$`)
	var name string
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := begin.FindStringSubmatch(line); m != nil {
			name = m[1]
			cur.Reset()
			continue
		}
		if name != "" && line == "=== END "+name+" ===" {
			out[name] = slices.Clone(cur.Bytes())
			name = ""
			continue
		}
		if name != "" {
			cur.WriteString(line + "\n")
		}
	}
	for _, want := range []string{"alerts", "query", "scrape", "scrape-after", "findings"} {
		if _, ok := out[want]; !ok {
			t.Fatalf("%s: no %s block (did e2e.sh fail?)", path, want)
		}
	}
	return out
}

// TestLab reads what make prom-test brought back from the lab guests
// (APMWATCH_PROM_LAB: the output files, one per kernel): Debian's
// Prometheus, scraping a live apmwatch audit with the shipped rules, has
// the missed-rearm alert pending or firing; the live scrapes pass promtool
// check metrics; the dashboard's and the rules' series are all in them (but
// for the fleet's and the publisher's); and the scrapes in testdata name
// the same apmwatch series as the live ones.
func TestLab(t *testing.T) {
	files := strings.Fields(os.Getenv("APMWATCH_PROM_LAB"))
	if len(files) == 0 {
		t.Skip("lab output: run make prom-test")
	}
	d, err := promcheck.ReadDashboard("../grafana/apmwatch-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	testdata := apmwatchNames(readScrapes(t, scrapes).Names())
	// The lab runs a plain audit: the fleet's and the publisher's series
	// are checked against the code instead (TestServiceScrapes).
	services := readScrapes(t, []string{fleetScrape, publishScrape}).Names()
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			blocks := labBlocks(t, f)
			var alerts struct {
				Status string
				Data   struct {
					Alerts []struct {
						Labels map[string]string
						State  string
					}
				}
			}
			if err := json.Unmarshal(blocks["alerts"], &alerts); err != nil {
				t.Fatalf("alerts: %v: %s", err, blocks["alerts"])
			}
			found := false
			for _, a := range alerts.Data.Alerts {
				if a.Labels["alertname"] == "ApmwatchMissedRearm" && (a.State == "pending" || a.State == "firing") &&
					a.Labels["severity"] == "error" && a.Labels["instance"] == "127.0.0.1:9578" {
					found = true
				}
			}
			if alerts.Status != "success" || !found {
				t.Errorf("no pending or firing ApmwatchMissedRearm: %s", blocks["alerts"])
			}
			if !bytes.Contains(blocks["query"], []byte(`"mig_state":"MIGRATED"},"value":[`)) {
				t.Errorf("recording rule apmwatch:qps:by_mig_state has no MIGRATED QP: %s", blocks["query"])
			}
			live := map[string]bool{}
			for _, name := range []string{"scrape", "scrape-after"} {
				promtool(t, blocks[name], "check", "metrics")
				s, err := promcheck.ParseScrape(blocks[name])
				if err != nil {
					t.Fatal(err)
				}
				for n := range s.Names() {
					live[n] = true
				}
			}
			exported := map[string]bool{}
			for n := range live {
				exported[n] = true
			}
			for n := range services {
				exported[n] = true
			}
			if missing := d.Unexported(exported); len(missing) > 0 {
				t.Errorf("the dashboard queries series the live audit does not export: %v", missing)
			}
			for _, g := range readRules(t).Groups {
				for _, r := range g.Rules {
					for _, n := range promcheck.MetricNames(r.Expr) {
						if !live[n] && !services[n] && !strings.Contains(n, ":") {
							t.Errorf("rule %s%s: %s not in the live scrape", r.Alert, r.Record, n)
						}
					}
				}
			}
			if got := apmwatchNames(live); !slices.Equal(got, testdata) {
				t.Errorf("live apmwatch series %v, testdata %v: refresh with make prom-testdata", got, testdata)
			}
			if !bytes.Contains(blocks["findings"], []byte(`"type":"resolution"`)) {
				t.Errorf("no resolution after the rearm: %s", blocks["findings"])
			}
		})
	}
}

func apmwatchNames(names map[string]bool) []string {
	var out []string
	for n := range names {
		if strings.HasPrefix(n, "apmwatch_") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
