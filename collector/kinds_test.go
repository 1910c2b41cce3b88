package collector

import (
	"reflect"
	"testing"

	"github.com/apmwatch/apmwatch/event"
)

// notFromProbes are the kinds no probe record carries.
var notFromProbes = map[event.Kind]bool{
	event.KindTruth: true, // rdma netlink readings (rdmanl.Merge)
}

// Every kind of event.Kinds that the probes send decodes from its record,
// with its payload: a kind added to event without its case in decode (or
// without saying it comes from elsewhere) fails here. The rest of the
// kinds' consumers are checked in internal/kindcheck.
func TestEveryProbeKindDecodes(t *testing.T) {
	for _, k := range event.Kinds() {
		if notFromProbes[k] {
			continue
		}
		r := header(uint8(k))
		e, err := testDecoder.decode(raw(&r))
		if err != nil || e == nil {
			t.Errorf("a record of kind %s: %v, %v (a probe kind needs its case in decoder.event; else list it in notFromProbes)", k, e, err)
			continue
		}
		payloads := 0
		v := reflect.ValueOf(e).Elem()
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
				payloads++
			}
		}
		if e.Kind != k || payloads != 1 {
			t.Errorf("a record of kind %s decodes to kind %s with %d payloads, want 1", k, e.Kind, payloads)
		}
	}
}
