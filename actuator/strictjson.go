package actuator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apmwatch/apmwatch/internal/escape"
)

// maxJSONDepth bounds the nesting of a policy file.
const maxJSONDepth = 16

// strictJSON checks what encoding/json lets through: data after the first
// value and duplicate object keys (json.Unmarshal keeps the last one, and
// matches keys case-insensitively, so "Mode" and "mode" are duplicates
// too). It walks the tokens; the value itself is decoded afterwards.
func strictJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	type frame struct {
		obj     bool
		wantKey bool
		keys    map[string]bool
		path    string
		lastKey string
	}
	var stack []*frame
	done := false
	for !done {
		tok, err := d.Token()
		if err != nil {
			if err == io.EOF {
				return errors.New("empty policy")
			}
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				done = len(stack) == 0
				continue
			}
			k, _ := tok.(string)
			f := foldKey(k)
			if top.keys[f] {
				return fmt.Errorf("duplicate key %q in %s", k, top.path)
			}
			top.keys[f] = true
			top.wantKey, top.lastKey = false, k
			continue
		}
		if top != nil && top.obj {
			top.wantKey = true
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxJSONDepth {
				return fmt.Errorf("nested deeper than %d", maxJSONDepth)
			}
			p := "the policy"
			switch { // keys escaped: the path is printed in errors
			case top != nil && top.obj && top.path == "the policy":
				p = escape.Text(top.lastKey)
			case top != nil && top.obj:
				p = top.path + "." + escape.Text(top.lastKey)
			case top != nil:
				p = top.path + "[]"
			}
			stack = append(stack, &frame{obj: tok == json.Delim('{'), wantKey: true, keys: map[string]bool{}, path: p})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			done = len(stack) == 0
		default:
			done = len(stack) == 0
		}
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("data after the policy object at byte %d", d.InputOffset())
	}
	return nil
}

// foldKey folds a key the way encoding/json matches field names: case
// insensitively, with the Kelvin sign as k and the long s as s.
func foldKey(k string) string {
	return strings.NewReplacer("\u212a", "k", "\u017f", "s").Replace(strings.ToLower(k))
}
