package escape

import "reflect"

// maxDepth bounds the nesting Value follows; the report types it is used on
// are a few levels deep and hold no cycles.
const maxDepth = 32

// Value returns v with every string reachable through exported struct
// fields, pointers, slices, arrays, maps and interfaces replaced by Text of
// it. It is for documents about to be encoded as JSON (which would
// otherwise replace invalid UTF-8 by U+FFFD): the result encodes to valid
// UTF-8 and every original string is recoverable with Unescape. v itself is
// not changed; the parts of it with nothing to escape are shared, not
// copied, so a clean document costs a walk and no memory.
func Value[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	e, changed := escaped(rv, 0)
	if !changed {
		return v
	}
	out := reflect.New(rv.Type()).Elem()
	out.Set(e)
	return out.Interface().(T)
}

// escaped returns v with its strings escaped, and whether anything changed
// (when not, v itself).
func escaped(v reflect.Value, depth int) (reflect.Value, bool) {
	if depth > maxDepth {
		return v, false
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		e := Text(s)
		if e == s {
			return v, false
		}
		n := reflect.New(v.Type()).Elem()
		n.SetString(e)
		return n, true
	case reflect.Pointer:
		if v.IsNil() {
			return v, false
		}
		e, changed := escaped(v.Elem(), depth+1)
		if !changed {
			return v, false
		}
		n := reflect.New(v.Type().Elem())
		n.Elem().Set(e)
		return n, true
	case reflect.Struct:
		var n reflect.Value
		for i := 0; i < v.NumField(); i++ {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			e, changed := escaped(v.Field(i), depth+1)
			if !changed {
				continue
			}
			if !n.IsValid() {
				n = reflect.New(v.Type()).Elem()
				n.Set(v)
			}
			n.Field(i).Set(e)
		}
		if n.IsValid() {
			return n, true
		}
		return v, false
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() || !holdsStrings(v.Type().Elem(), 0) {
			return v, false
		}
		var n reflect.Value
		for i := 0; i < v.Len(); i++ {
			e, changed := escaped(v.Index(i), depth+1)
			if !changed {
				continue
			}
			if !n.IsValid() {
				if v.Kind() == reflect.Slice {
					n = reflect.MakeSlice(v.Type(), v.Len(), v.Len())
					reflect.Copy(n, v)
				} else {
					n = reflect.New(v.Type()).Elem()
					n.Set(v)
				}
			}
			n.Index(i).Set(e)
		}
		if n.IsValid() {
			return n, true
		}
		return v, false
	case reflect.Map:
		if v.IsNil() {
			return v, false
		}
		dirty := false
		for it := v.MapRange(); it.Next() && !dirty; {
			_, kc := escaped(it.Key(), depth+1)
			_, vc := escaped(it.Value(), depth+1)
			dirty = kc || vc
		}
		if !dirty {
			return v, false
		}
		n := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			k, _ := escaped(it.Key(), depth+1)
			e, _ := escaped(it.Value(), depth+1)
			n.SetMapIndex(k, e)
		}
		return n, true
	case reflect.Interface:
		if v.IsNil() {
			return v, false
		}
		e, changed := escaped(v.Elem(), depth+1)
		if !changed {
			return v, false
		}
		n := reflect.New(v.Type()).Elem()
		n.Set(e)
		return n, true
	}
	return v, false
}

// holdsStrings reports whether values of t can reach a string; slices of
// numbers are not walked.
func holdsStrings(t reflect.Type, depth int) bool {
	if depth > maxDepth {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Interface, reflect.Map:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsStrings(t.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() && holdsStrings(t.Field(i).Type, depth+1) {
				return true
			}
		}
	}
	return false
}
