package escape

import "reflect"

// maxDepth bounds the nesting Value follows; the report types it is used on
// are a few levels deep and hold no cycles.
const maxDepth = 32

// Value returns a copy of v in which every string reachable through
// exported struct fields, pointers, slices, arrays, maps and interfaces has
// been replaced by Text of it. It is for documents about to be encoded as
// JSON (which would otherwise replace invalid UTF-8 by U+FFFD): the copy
// encodes to valid UTF-8 and every original string is recoverable with
// Unescape. v itself is not changed.
func Value[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	out := reflect.New(rv.Type()).Elem()
	out.Set(copyEscaped(rv, 0))
	return out.Interface().(T)
}

func copyEscaped(v reflect.Value, depth int) reflect.Value {
	if depth > maxDepth {
		return v
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if e := Text(s); e != s {
			n := reflect.New(v.Type()).Elem()
			n.SetString(e)
			return n
		}
		return v
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		n := reflect.New(v.Type().Elem())
		n.Elem().Set(copyEscaped(v.Elem(), depth+1))
		return n
	case reflect.Struct:
		n := reflect.New(v.Type()).Elem()
		n.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				n.Field(i).Set(copyEscaped(v.Field(i), depth+1))
			}
		}
		return n
	case reflect.Slice:
		if v.IsNil() || !holdsStrings(v.Type().Elem(), 0) {
			return v
		}
		n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			n.Index(i).Set(copyEscaped(v.Index(i), depth+1))
		}
		return n
	case reflect.Array:
		n := reflect.New(v.Type()).Elem()
		n.Set(v)
		if holdsStrings(v.Type().Elem(), 0) {
			for i := 0; i < v.Len(); i++ {
				n.Index(i).Set(copyEscaped(v.Index(i), depth+1))
			}
		}
		return n
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			n.SetMapIndex(copyEscaped(it.Key(), depth+1), copyEscaped(it.Value(), depth+1))
		}
		return n
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		n := reflect.New(v.Type()).Elem()
		n.Set(copyEscaped(v.Elem(), depth+1))
		return n
	}
	return v
}

// holdsStrings reports whether values of t can reach a string; slices of
// numbers are shared, not copied.
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
