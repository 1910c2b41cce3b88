package audit

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apmwatch/apmwatch/event"
)

// fakeSource is an event.Source the test feeds.
type fakeSource struct {
	meta   event.Meta
	ch     chan *event.Event
	done   chan struct{}
	once   sync.Once
	lost   atomic.Uint64
	closed atomic.Bool
	at     func() uint64 // the host's clock, for Stats.At (nil: 0)
}

func newFakeSource(host string) *fakeSource {
	return &fakeSource{meta: event.Meta{Host: host, Kernel: "6.12-test", Version: "test",
		Hooks: []event.Hook{{Name: "ib_modify_qp", Module: "ib_core", Method: event.HookFentry},
			{Name: "mlx5_ib_qp_event", Module: "mlx5_ib", Method: event.HookMissing}}},
		ch: make(chan *event.Event, 1024), done: make(chan struct{})}
}

func (s *fakeSource) Meta() event.Meta { return s.meta }

func (s *fakeSource) Next(ctx context.Context) (*event.Event, error) {
	select {
	case e := <-s.ch:
		return e, nil
	case <-s.done:
		select {
		case e := <-s.ch:
			return e, nil
		default:
			return nil, io.EOF
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *fakeSource) Stats() event.Stats {
	st := event.Stats{Lost: s.lost.Load()}
	if s.at != nil {
		st.At = s.at()
	}
	return st
}

func (s *fakeSource) Close() error {
	s.once.Do(func() { s.closed.Store(true); close(s.done) })
	return nil
}

// lineJSON is a finding log line as a consumer reads it.
type lineJSON struct {
	Type     string `json:"type"`
	Host     string `json:"host"`
	Bundle   string `json:"bundle"`
	ID       uint64 `json:"id"`
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	QP       struct {
		Device string `json:"device"`
		QPN    uint32 `json:"qpn"`
	} `json:"qp"`
	Resolved    bool   `json:"resolved"`
	Resolves    uint64 `json:"resolves"`
	Unprotected int64  `json:"unprotected_ns"`
}

// syncBuffer is a bytes.Buffer safe for the daemon's log and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}
