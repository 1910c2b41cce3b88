// Package promcheck forwards to deploy/promcheck, where the helpers of the
// Prometheus rules' and Grafana dashboard's tests live. Importers use
// github.com/apmwatch/apmwatch/deploy/promcheck; this package goes once
// none is left.
package promcheck

import "github.com/apmwatch/apmwatch/deploy/promcheck"

type (
	Series    = promcheck.Series
	Scrape    = promcheck.Scrape
	Dashboard = promcheck.Dashboard
	Panel     = promcheck.Panel
)

var (
	ParseSeries   = promcheck.ParseSeries
	ParseScrape   = promcheck.ParseScrape
	ReadScrape    = promcheck.ReadScrape
	MetricNames   = promcheck.MetricNames
	ReadDashboard = promcheck.ReadDashboard
	PromQL        = promcheck.PromQL
	Promtool      = promcheck.Promtool
)
