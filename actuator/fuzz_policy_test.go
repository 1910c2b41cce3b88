package actuator

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/apmwatch/apmwatch/internal/escape"
)

// FuzzPolicy loads arbitrary bytes as a policy file (LoadPolicy, as
// `apmwatch audit --policy` and `actuate policy-check` do; `make
// fuzz-policy` runs it for FUZZTIME in `make test`). Nothing may panic. A
// policy that loads validates, has no two keys encoding/json would take
// for one field, and survives a round trip: marshalled and loaded again it
// is the same policy. A policy refused gets one line of error, lowercase,
// with nothing a terminal acts on.
func FuzzPolicy(f *testing.F) {
	path := filepath.Join(f.TempDir(), "policy.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := LoadPolicy(path)
		if err != nil {
			checkPolicyError(t, err)
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("a policy that loaded does not validate: %v", err)
		}
		if err := foldedDuplicate(data); err != nil {
			t.Fatalf("a policy that loaded has %v", err)
		}
		for i, r := range p.Alternates {
			if _, err := r.Alt.Path(); err != nil {
				t.Fatalf("alternates[%d] loaded but gives no path: %v", i, err)
			}
			if r.Alt.PathBits > maxPathBits {
				t.Fatalf("alternates[%d] loaded with src_path_bits %d, outside the 7-bit field", i, r.Alt.PathBits)
			}
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("a policy that loaded does not marshal: %v", err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := LoadPolicy(path)
		if err != nil {
			t.Fatalf("a marshalled policy does not load: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("a policy changed in a round trip:\n was %+v\n  is %+v", p, again)
		}
		if b2, _ := json.Marshal(again); !bytes.Equal(b, b2) {
			t.Fatalf("a policy marshals differently once loaded again:\n%s\n%s", b, b2)
		}
	})
}

// checkPolicyError checks what `actuate policy-check` prints of a refused
// policy: one line, starting lowercase, nothing a terminal acts on.
func checkPolicyError(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" {
		t.Fatal("an empty error")
	}
	if r, _ := utf8.DecodeRuneInString(msg); unicode.IsUpper(r) {
		t.Fatalf("error not lowercase: %q", msg)
	}
	for i := 0; i < len(msg); {
		r, n := utf8.DecodeRuneInString(msg[i:])
		if r == utf8.RuneError && n <= 1 || r != '\\' && escape.Text(string(r)) != string(r) {
			t.Fatalf("error with %q at byte %d (a terminal control, a line break or a byte not UTF-8):\n%q", msg[i:i+n], i, msg)
		}
		i += n
	}
}

// foldedDuplicate reports an object of data with two keys encoding/json
// matches to one field (bytes.EqualFold): one would silently win.
func foldedDuplicate(data []byte) error {
	d := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj, key bool
		keys     []string
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err != nil {
			return nil
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.key {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				continue
			}
			k := tok.(string)
			for _, o := range top.keys {
				if bytes.EqualFold([]byte(o), []byte(k)) {
					return fmt.Errorf("keys %q and %q in one object", o, k)
				}
			}
			top.keys = append(top.keys, k)
			top.key = false
			continue
		}
		if top != nil && top.obj {
			top.key = true
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, &frame{obj: tok == json.Delim('{'), key: true})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

var updatePolicyCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus in testdata/fuzz/FuzzPolicy")

// policySeeds are the policies of the repository (docs/actuator.md's
// example, the tests', the lab demo's) and the refusals the tests check.
func policySeeds(t *testing.T) map[string][]byte {
	example, err := os.ReadFile(filepath.Join("testdata", "policy-example.json"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"example": example,
		"tests":   []byte(goodPolicy),
		"cli":     []byte(`{"mode":"enforce","allow":{"comms":["app"]}}`),
		"lab-demo": []byte(`{"mode": "enforce", "allow": {"devices": ["ibsim0", "ibsim1"], "comms": ["lab-ibpair"]},
 "rate_limit": {"max": 10, "per": "1m", "owner_max": 10},
 "alternates": [{"device": "ibsim0", "port": 2, "alt": {"port": 1, "dlid": 3}},
                {"device": "ibsim1", "port": 2, "alt": {"port": 1, "dlid": 1}}]}
`),
		"owners": []byte(`{"allow":{"uids":[0,1000],"cgroups":["/system.slice/app.service"],"units":["app.service"],` +
			`"pods":["1B2C3D4E-0000-4000-8000-000000000001"],"pids":[7]},"grace":"1h","rate_limit":{"max":10000,"per":"24h"}}`),
		"global-alt": []byte(`{"allow":{"devices":["mlx5_0"]},"previous_primary":true,"rearm_without_alternate":true,` +
			`"alternates":[{"device":"mlx5_0","alt":{"port":2,"dgid":"fe80::2:c903:a:1","sgid_index":1,"hop_limit":2,"sl":3,"pkey_index":1}}]}`),
		"duplicate-folded": []byte(`{"allow":{"pids":[1]},"mode":"monitor","MODE":"enforce","\u212aey":1}`),
		"duplicate-nested": []byte("{\"allow\":{\"pids\":[1]},\"x\\n\\u001b[2J\":{\"a\":1,\"a\":2}}"),
		"duration-object":  []byte("{\"allow\":{\"pids\":[1]},\"grace\":{\n\"x\":\"\xc2\x9b\"}}"),
		"trailing":         []byte(`{"allow":{"pids":[1]}} {"mode":"enforce"}`),
		"deep":             []byte(strings.Repeat(`{"a":`, 20) + "1" + strings.Repeat("}", 20)),
		"bad-values":       []byte(`{"mode":"yolo","grace":"-1s","allow":{"cgroups":["rel"],"units":["a/b"],"pods":["../x"]},"rate_limit":{"max":0,"per":"1ms","owner_max":-1},"alternates":[{"alt":{"dgid":"x"}}]}`),
		"not-json":         []byte("\xff{mode"),
	}
}

// TestPolicySeedCorpus checks the committed seed corpus of FuzzPolicy is
// there, and writes it with -update-corpus.
func TestPolicySeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzPolicy")
	seeds := policySeeds(t)
	if !*updatePolicyCorpus {
		for name := range seeds {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("seed %s missing: go test ./actuator -run TestPolicySeedCorpus -update-corpus", name)
			}
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Errors about a policy name its keys escaped and fit on one line.
func TestPolicyErrorsAreOneLine(t *testing.T) {
	for _, in := range []string{
		"{\"allow\":{\"pids\":[1]},\"x\\n\\u001b[2J\":{\"a\":1,\"a\":2}}",
		"{\"allow\":{\"pids\":[1]},\"grace\":{\n\"x\":\"\xc2\x9b\"}}",
		"{\"allow\":{\"pids\":[1]},\"grace\":[" + strings.Repeat("1,", 1000) + "1]}",
	} {
		_, err := ParsePolicy([]byte(in))
		if err == nil {
			t.Fatalf("%q loaded", in)
		}
		checkPolicyError(t, err)
		if len(err.Error()) > 200 {
			t.Errorf("an error of %d bytes: %.100q...", len(err.Error()), err)
		}
	}
}
