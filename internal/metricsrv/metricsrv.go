// Package metricsrv serves a Prometheus registry over HTTP until a context
// ends: the one metrics endpoint of audit and fleet.
package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Option adds handlers to the endpoint.
type Option func(*http.ServeMux)

// WithProfiles serves the Go runtime's profiles at /debug/pprof/ (heap,
// goroutines, CPU): for diagnosing the daemon itself, on a loopback
// address only (the caller checks).
func WithProfiles() Option {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
}

// Serve listens on addr and serves reg at /metrics (and banner at /, when
// given) until ctx ends. A listen error is returned; a later serve error
// goes to onErr.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, banner string, onErr func(error), opts ...Option) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if banner != "" {
		mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, banner) })
	}
	for _, o := range opts {
		o(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			onErr(err)
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
