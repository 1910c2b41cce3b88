package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/nats-io/nats.go"
)

// A server that denies a client a publish or a subscription says so
// asynchronously (-ERR 'Permissions Violation ...') and leaves the
// request unanswered: a JetStream API call the account does not allow
// would wait for its whole timeout. denials routes those errors to the
// calls in flight on the connection (Guard), so that they fail at once,
// saying what was denied.

// DeniedError is a publish or subscription the server refused.
type DeniedError struct {
	Op      string // "publish to" or "subscription to"
	Subject string
}

func (e *DeniedError) Error() string {
	s := fmt.Sprintf("nats denies this user %s %q", e.Op, e.Subject)
	if e.Op == opSubscribe && strings.HasPrefix(e.Subject, "_INBOX") {
		s += " (its replies come to that inbox: give --nats-inbox-prefix, the prefix its permissions allow)"
	}
	return s
}

const (
	opPublish   = "publish to"
	opSubscribe = "subscription to"
)

var violationRe = regexp.MustCompile(`(?i)(publish|subscription) to "([^"]{1,512})"`)

// parseViolation reads the server's permission error; the subject is the
// server's text (hostile like any network input): escaped before a log.
func parseViolation(err error) *DeniedError {
	m := violationRe.FindStringSubmatch(err.Error())
	if m == nil {
		return &DeniedError{Op: opPublish, Subject: "?"}
	}
	op := opPublish
	if m[1][0] == 's' || m[1][0] == 'S' {
		op = opSubscribe
	}
	return &DeniedError{Op: op, Subject: escape.Text(m[2])}
}

// denials is one connection's: the calls waiting, and what was logged.
type denials struct {
	mu      sync.Mutex
	waiting map[*int]context.CancelCauseFunc
	prefix  string       // the connection's inbox prefix
	inbox   *DeniedError // its inbox denied: every later request would go unanswered
	logged  map[string]bool
	log     *slog.Logger
}

// connDenials finds a connection's denials (connect registers them).
var connDenials sync.Map // *nats.Conn -> *denials

func newDenials(log *slog.Logger, inboxPrefix string) *denials {
	if inboxPrefix == "" {
		inboxPrefix = nats.InboxPrefix[:len(nats.InboxPrefix)-1]
	}
	return &denials{waiting: map[*int]context.CancelCauseFunc{}, logged: map[string]bool{}, log: log, prefix: inboxPrefix + "."}
}

// handler is the connection's asynchronous error callback.
func (d *denials) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		if d.log != nil {
			d.log.Warn("nats", "err", err)
		}
		return
	}
	e := parseViolation(err)
	d.mu.Lock()
	if e.Op == opSubscribe && strings.HasPrefix(e.Subject, d.prefix) {
		d.inbox = e
	}
	// deleting a consumer is a clean-up nothing waits for (the server
	// drops it after a while)
	if !strings.HasPrefix(e.Subject, "$JS.API.CONSUMER.DELETE.") {
		for _, cancel := range d.waiting {
			cancel(e)
		}
	}
	first := !d.logged[e.Op+e.Subject] && len(d.logged) < 64
	if first {
		d.logged[e.Op+e.Subject] = true
	}
	d.mu.Unlock()
	if first && d.log != nil {
		d.log.Warn("nats: permission denied", "err", e)
	}
}

// reconnected forgets a denied subscription: the client subscribes again,
// and the server's permissions may have changed.
func (d *denials) reconnected(*nats.Conn) {
	d.mu.Lock()
	d.inbox = nil
	d.mu.Unlock()
}

// Guard returns a context that ends, with a *DeniedError as its cause,
// when the server denies this connection anything while it is in use;
// done releases it. A connection whose inbox was denied fails at once.
func Guard(ctx context.Context, nc *nats.Conn) (context.Context, func()) {
	v, ok := connDenials.Load(nc)
	if !ok {
		return ctx, func() {}
	}
	d := v.(*denials)
	c, cancel := context.WithCancelCause(ctx)
	key := new(int)
	d.mu.Lock()
	if d.inbox != nil {
		cancel(d.inbox)
	} else {
		d.waiting[key] = cancel
	}
	d.mu.Unlock()
	return c, func() {
		d.mu.Lock()
		delete(d.waiting, key)
		d.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Denied returns the denial that ended a guarded context, or err.
func Denied(ctx context.Context, err error) error {
	var d *DeniedError
	if err != nil && errors.As(context.Cause(ctx), &d) {
		return d
	}
	return err
}
