package fleet

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/apmwatch/apmwatch/fleet/fleettest"
	"github.com/apmwatch/apmwatch/fleet/wire"
)

// The engine's decoder takes a record or a heartbeat exactly as
// encoding/json does, hostile ones included: the same value, or an
// error from both.
func FuzzDecodeJSONAsTheStandardLibrary(f *testing.F) {
	var c wire.Conn
	synth(&c, 7, 1, fleettest.T0)
	good, _ := json.Marshal(&c)
	for _, s := range []string{
		string(good),
		`{"HOST":"a","Device":"d","local":{"qpn":5},"host":"b"}`, // case, a key twice
		"{\"host\":\"a\xff\xfeb\",\"comm\":\"\\ud800x\"}",        // invalid UTF-8, a lone surrogate
		`{"host":"a","local":{"qpn":4294967296}}`,                // out of range
		`{"host":null,"episode":{"migrations":[null,"2026-01-01T00:00:00Z"]}}`,
		`{"at":"not a time"}`, `{"rev":-1}`, `{"armed":"true"}`, `[]`, `null`, ``, `{`, `{"host":"a"} x`,
		`{"host":"a","unknown":{"deep":[1,2,{"x":[]}]}}`,
		`{"host":"a","queued":1,"every":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var a, b wire.Conn
		ea, eb := decodeJSON(data, &a), json.Unmarshal(data, &b)
		if (ea == nil) != (eb == nil) || ea == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: the engine's decoder gave %+v (%v), encoding/json %+v (%v)", data, a, ea, b, eb)
		}
		var ha, hb wire.Heartbeat
		ea, eb = decodeJSON(data, &ha), json.Unmarshal(data, &hb)
		if (ea == nil) != (eb == nil) || ea == nil && !reflect.DeepEqual(ha, hb) {
			t.Fatalf("%q: heartbeat: the engine's decoder gave %+v (%v), encoding/json %+v (%v)", data, ha, ea, hb, eb)
		}
	})
}
