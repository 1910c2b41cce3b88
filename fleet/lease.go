package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apmwatch/apmwatch/fleet/natsconn"
	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLeaseTTL is --lease-ttl's default.
const DefaultLeaseTTL = 15 * time.Second

// Bounds of --lease-ttl: JetStream ages messages out no finer than
// 100 ms, and a lease longer than an hour leaves a share unjudged as long.
const (
	minLeaseTTL = 100 * time.Millisecond
	maxLeaseTTL = time.Hour
)

// leases are one instance's view of the bucket.
type leases struct {
	kv       jetstream.KeyValue
	instance int
	run      string        // this process: two runs of one instance are two holders
	ttl      time.Duration // the bucket's: every instance's lease TTL
}

// leaseValue is what a lease key holds.
type leaseValue struct {
	Instance int    `json:"instance"`
	Run      string `json:"run"`
}

// openLeases opens the bucket, or creates it with TTL ttl. The bucket's
// TTL is every instance's lease TTL (leases.ttl): the --lease-ttl of the
// instance that created it. Another given to a later instance is not
// applied to the bucket (the instances renewing every third of the old
// TTL would lose their leases under a shorter one); the caller uses the
// bucket's and says so. A user that may not create the bucket (the local
// user of an embedded server without --auth) uses it as it is.
func openLeases(ctx context.Context, js jetstream.JetStream, instance int, ttl time.Duration, replicas int) (*leases, error) {
	kv, err := lookupLeases(ctx, js)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		var cerr error
		if kv, cerr = createLeases(ctx, js, ttl, replicas); cerr != nil {
			// another instance made it meanwhile, or this user may not
			if kv, err = lookupLeases(ctx, js); err != nil {
				err = cerr
			}
		} else {
			err = nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("opening the lease bucket %s: %w", wire.LeaseBucket, err)
	}
	c, done := natsconn.Guard(ctx, js.Conn())
	st, err := kv.Status(c)
	done()
	if err != nil {
		return nil, fmt.Errorf("reading the lease bucket %s: %w", wire.LeaseBucket, natsconn.Denied(c, err))
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("naming this run: %w", err)
	}
	return &leases{kv: kv, instance: instance, run: hex.EncodeToString(b), ttl: st.TTL()}, nil
}

func lookupLeases(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	ctx, done := natsconn.Guard(ctx, js.Conn())
	defer done()
	kv, err := js.KeyValue(ctx, wire.LeaseBucket)
	return kv, natsconn.Denied(ctx, err)
}

func createLeases(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	ctx, done := natsconn.Guard(ctx, js.Conn())
	defer done()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: wire.LeaseBucket, TTL: ttl, History: 1,
		Replicas: replicas, Storage: jetstream.FileStorage, Description: "apmwatch fleet: which instance judges each share"})
	return kv, natsconn.Denied(ctx, err)
}

func leaseKey(share int) string { return fmt.Sprintf("share.%d", share) }
func homeKey(share int) string  { return fmt.Sprintf("home.%d", share) }

func (l *leases) value() []byte {
	b, _ := json.Marshal(leaseValue{Instance: l.instance, Run: l.run})
	return b
}

// acquire takes share's lease when no one holds it, returning the
// revision to renew it with; errLeaseHeld when someone does.
func (l *leases) acquire(ctx context.Context, share int) (uint64, error) {
	rev, err := l.kv.Create(ctx, leaseKey(share), l.value())
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, errLeaseHeld
	}
	if err != nil {
		return 0, fmt.Errorf("taking the lease of share %d: %w", share, err)
	}
	return rev, nil
}

// reclaim takes over share's lease from an earlier run of this instance
// (the same --instance, another process: one that died, or restarted
// within a TTL), over the revision it holds, so that a restart does not
// wait that lease out; errLeaseHeld when another instance holds it.
func (l *leases) reclaim(ctx context.Context, share int) (uint64, error) {
	e, err := l.kv.Get(ctx, leaseKey(share))
	if err != nil {
		return 0, fmt.Errorf("reading the lease of share %d: %w", share, err)
	}
	var v leaseValue
	if json.Unmarshal(e.Value(), &v) != nil || v.Instance != l.instance || v.Run == l.run {
		return 0, errLeaseHeld
	}
	return l.renew(ctx, share, e.Revision())
}

// errLeaseHeld: another instance holds the lease.
var errLeaseHeld = errors.New("the lease is held")

// renew writes share's lease again over revision rev, returning the new
// revision; it fails when the key is no longer at rev (expired, taken,
// or written by anyone else).
func (l *leases) renew(ctx context.Context, share int, rev uint64) (uint64, error) {
	n, err := l.kv.Update(ctx, leaseKey(share), l.value(), rev)
	if err != nil {
		return 0, fmt.Errorf("renewing the lease of share %d (revision %d): %w", share, rev, err)
	}
	return n, nil
}

// release gives share's lease up, if it is still at revision rev.
func (l *leases) release(ctx context.Context, share int, rev uint64) error {
	if err := l.kv.Delete(ctx, leaseKey(share), jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("releasing the lease of share %d: %w", share, err)
	}
	return nil
}

// announce says that share's home instance runs.
func (l *leases) announce(ctx context.Context, share int) error {
	if _, err := l.kv.Put(ctx, homeKey(share), l.value()); err != nil {
		return fmt.Errorf("announcing the home of share %d: %w", share, err)
	}
	return nil
}

// leave says that share's home instance stops.
func (l *leases) leave(ctx context.Context, share int) error {
	if err := l.kv.Delete(ctx, homeKey(share)); err != nil {
		return fmt.Errorf("leaving the home of share %d: %w", share, err)
	}
	return nil
}

// homeRuns reports whether share's home instance announced itself within
// the TTL; an error counts as yes (the share is not adopted on a doubt).
func (l *leases) homeRuns(ctx context.Context, share int) bool {
	_, err := l.kv.Get(ctx, homeKey(share))
	return !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted)
}
