package postmortem

import (
	"testing"
	"time"
)

// The summary counts migrations, not event copies: a PATH_MIG that two
// hooks saw (the driver's and ib_core's) is one migration; two PATH_MIGs
// with a rearm between are two.
func TestMigrationsCountOnce(t *testing.T) {
	b := newHost(0)
	connect(b, 17, 18, 0x21)
	b.After(time.Second).PathMig(17)
	b.After(40 * time.Millisecond).PathMig(17) // the second hook's copy
	b.After(time.Second).Rearm(17)
	b.After(time.Second).PathMig(17)
	b.After(time.Second).Rearm(17)
	r := run(t, Options{}, write(t, t.TempDir(), "a.rec", "h", b, uint64(10*time.Second)))
	if r.Summary.Migrations != 2 {
		t.Fatalf("%d migrations, want 2", r.Summary.Migrations)
	}
}
