package metricsrv

import (
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/apmwatch/apmwatch/internal/escape"
)

// quiet is the exporter toolkit's logger: its start-up lines say nothing
// the daemon does not, and a client's failed TLS handshake or password is
// not worth a line in the daemon's log (a client could flood it).
var quiet = slog.New(slog.DiscardHandler)

// WithWebConfig serves TLS and basic authentication as the Prometheus web
// configuration file at path says (tls_server_config, basic_auth_users,
// http_server_config); "" serves plain HTTP to anyone. The file is read
// again on each new connection, as node_exporter does, so a renewed
// certificate or a changed password needs no restart.
func WithWebConfig(path string) Option {
	return func(s *settings) { s.webConfig = path }
}

// CheckWebConfig loads the web configuration file at path ("" is none) as
// the endpoint would, certificates and keys included, and says in one
// line what is wrong with it.
func CheckWebConfig(path string) error {
	if path == "" {
		return nil
	}
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("web config %s: %s", oneLine(path), oneLine(err.Error()))
	}
	return nil
}

// maxErrLen bounds an error about the file: YAML errors quote its content.
const maxErrLen = 300

// oneLine makes an error one bounded, escaped line.
func oneLine(s string) string {
	s = escape.Text(strings.Join(strings.Fields(s), " "))
	if len(s) > maxErrLen {
		n := maxErrLen
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "..."
	}
	return s
}
