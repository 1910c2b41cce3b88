package deadline

import (
	"context"
	"testing"
	"time"
)

func TestReuseKeepsOneContextPerDeadlineAndParent(t *testing.T) {
	var d Reuse
	defer d.Stop()
	bg := context.Background()
	if got := d.Ctx(bg, time.Time{}); got != bg {
		t.Fatalf("a zero deadline: got %v, want the parent itself", got)
	}
	at := time.Now().Add(time.Hour)
	c1 := d.Ctx(bg, at)
	if dl, ok := c1.Deadline(); !ok || !dl.Equal(at) {
		t.Fatalf("deadline %v %v, want %v", dl, ok, at)
	}
	if c2 := d.Ctx(bg, at); c2 != c1 {
		t.Errorf("the same deadline and parent made a new context")
	}
	c3 := d.Ctx(bg, at.Add(time.Second))
	if c3 == c1 || c1.Err() == nil {
		t.Errorf("a new deadline: want a new context and the old one cancelled (old err %v)", c1.Err())
	}
	parent, cancel := context.WithCancel(bg)
	defer cancel()
	c4 := d.Ctx(parent, at.Add(time.Second))
	if c4 == c3 || c3.Err() == nil {
		t.Errorf("a new parent: want a new context and the old one cancelled")
	}
	cancel()
	if c4.Err() == nil {
		t.Errorf("the parent's cancel did not reach the context handed out")
	}
	d.Stop()
	if c := d.Ctx(bg, at); c == c4 || c.Err() != nil {
		t.Errorf("after Stop: want a fresh, live context")
	}
}
