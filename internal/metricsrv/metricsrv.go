// Package metricsrv serves a Prometheus registry over HTTP until a context
// ends: the one metrics endpoint of audit and fleet.
//
// The endpoint is bounded so that no client can grow the (root) daemon or
// starve the scrapes by holding connections open: at most maxConns at once
// and maxConnsPerClient from one remote address, an idle connection (no
// request yet, or keep-alive between requests) closed to make room for a
// new one (connLimit), a request's header within readHeaderTimeout, the
// whole request within readTimeout, an idle keep-alive connection closed
// after idleTimeout, and profiles of at most maxProfileSeconds.
//
// TLS and basic authentication come from a Prometheus web configuration
// file (WithWebConfig; the format of github.com/prometheus/exporter-toolkit,
// as node_exporter's --web.config.file).
package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
)

// The endpoint's bounds (variables so that the tests can shorten them).
var (
	maxConns          = 32
	maxConnsPerClient = 8
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	idleTimeout       = 10 * time.Second
	// writeTimeout covers the longest response: a profile of
	// maxProfileSeconds, then its transfer.
	writeTimeout = (maxProfileSeconds + 15) * time.Second
)

// maxProfileSeconds bounds the CPU profile and execution trace a request
// may ask for (?seconds=N).
const maxProfileSeconds = 30

// Option adds handlers or settings to the endpoint.
type Option func(*settings)

// settings are the endpoint's options.
type settings struct {
	mux       *http.ServeMux
	webConfig string
}

// WithProfiles serves the Go runtime's profiles at /debug/pprof/ (heap,
// goroutines, CPU, trace): for diagnosing the daemon itself, on a loopback
// address only (the caller checks). The command line is not served (it
// holds the daemon's flags), and a CPU profile or trace longer than
// maxProfileSeconds is refused.
func WithProfiles() Option {
	return func(s *settings) {
		mux := s.mux
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
		mux.HandleFunc("/debug/pprof/profile", bounded(pprof.Profile))
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", bounded(pprof.Trace))
	}
}

// CheckProfilesAddr allows profiles (--pprof) only on a loopback metrics
// address (--metrics-addr): they show the daemon's memory, which holds
// host data.
func CheckProfilesAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("--pprof needs --metrics-addr")
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--pprof needs a loopback --metrics-addr, not %q", addr)
	}
	return nil
}

// bounded refuses a ?seconds= over maxProfileSeconds, or not a number.
func bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s := r.URL.Query().Get("seconds"); s != "" {
			if n, err := strconv.Atoi(s); err != nil || n < 1 || n > maxProfileSeconds {
				http.Error(w, fmt.Sprintf("seconds must be 1..%d", maxProfileSeconds), http.StatusBadRequest)
				return
			}
		}
		h(w, r)
	}
}

// Serve listens on addr and serves reg at /metrics (and banner at /, when
// given) until ctx ends. A listen error or a bad web configuration file is
// returned; a later serve error goes to onErr.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, banner string, onErr func(error), opts ...Option) error {
	s := settings{mux: http.NewServeMux()}
	s.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if banner != "" {
		s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, banner) })
	}
	for _, o := range opts {
		o(&s)
	}
	if err := CheckWebConfig(s.webConfig); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for metrics: %w", err)
	}
	lim := newConnLimit(ln, maxConns, maxConnsPerClient)
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: 16 << 10,
		ConnState: lim.connState, ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		err := web.Serve(lim, srv, &web.FlagConfig{WebConfigFile: &s.webConfig}, quiet)
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			onErr(fmt.Errorf("serving metrics: %w", err))
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return nil
}
