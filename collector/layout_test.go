package collector

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/apmwatch/apmwatch/event"
	"github.com/cilium/ebpf/btf"
)

// goName is bpf2go's name for a C member: snake_case to CamelCase.
func goName(c string) string {
	var b strings.Builder
	up := true
	for _, r := range c {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// checkLayout compares a Go struct with the BTF of the compiled object,
// member by member: name, offset and size.
func checkLayout(t *testing.T, spec *btf.Spec, cName string, goType reflect.Type) {
	t.Helper()
	var st *btf.Struct
	if err := spec.TypeByName(cName, &st); err != nil {
		t.Fatalf("%s not in the object's BTF: %v", cName, err)
	}
	if int(st.Size) != int(goType.Size()) {
		t.Errorf("%s: %d bytes in C, %d in Go", cName, st.Size, goType.Size())
	}
	fields := map[string]reflect.StructField{}
	for i := 0; i < goType.NumField(); i++ {
		f := goType.Field(i)
		fields[f.Name] = f
	}
	for _, m := range st.Members {
		f, ok := fields[goName(m.Name)]
		if !ok {
			t.Errorf("%s.%s: no Go field %s", cName, m.Name, goName(m.Name))
			continue
		}
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			t.Fatal(err)
		}
		if uint32(f.Offset) != m.Offset.Bytes() || int(f.Type.Size()) != size {
			t.Errorf("%s.%s: C offset %d size %d, Go offset %d size %d",
				cName, m.Name, m.Offset.Bytes(), size, f.Offset, f.Type.Size())
		}
	}
}

func TestRecordLayoutMatchesObject(t *testing.T) {
	spec, err := loadApm()
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, spec.Types, "apm_record", reflect.TypeOf(apmApmRecord{}))
	checkLayout(t, spec.Types, "apm_path", reflect.TypeOf(apmApmPath{}))
	checkLayout(t, spec.Types, "apm_config", reflect.TypeOf(apmApmConfig{}))
	if recordSize != 248 || pathsSize != 184 || shortSize != 128 {
		t.Errorf("record is %d bytes, %d with paths, %d without; docs/performance.md and the ring buffer sizing assume 248, 184 and 128",
			recordSize, pathsSize, shortSize)
	}
}

func TestEveryHookProgramExists(t *testing.T) {
	spec, err := loadApm()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range defaultHooks() {
		for _, p := range []string{h.Fentry, h.Fexit, h.Kprobe, h.Kretprobe, h.TPBTF, h.RawTP} {
			if p != "" && spec.Programs[p] == nil {
				t.Errorf("hook %s: no program %s", h.Name, p)
			}
		}
	}
	for _, m := range sharedMaps {
		if spec.Maps[m] == nil {
			t.Errorf("no map %s", m)
		}
	}
	// Each hook loads its own collection: a map that the programs of two
	// hooks use must be shared, else each has its own copy, invisible to
	// the other.
	users := map[string]map[string]bool{} // map -> hooks whose programs use it
	for _, h := range defaultHooks() {
		for _, p := range []string{h.Fentry, h.Fexit, h.Kprobe, h.Kretprobe, h.TPBTF, h.RawTP} {
			if spec.Programs[p] == nil {
				continue
			}
			for _, ins := range spec.Programs[p].Instructions {
				if ref := ins.Reference(); spec.Maps[ref] != nil && !strings.HasPrefix(ref, ".") {
					if users[ref] == nil {
						users[ref] = map[string]bool{}
					}
					users[ref][h.Name] = true
				}
			}
		}
	}
	for m, hooks := range users {
		if len(hooks) > 1 && !slices.Contains(sharedMaps, m) {
			t.Errorf("map %s, used by the hooks %v, is not in sharedMaps: each would have its own", m, hooks)
		}
	}
}

// The record kinds are event.Kind's numbers: each BPF enum apm_kind value,
// converted, names the event kind of the same name.
func TestKindsMatchBPF(t *testing.T) {
	for k, want := range map[apmApmKind]string{
		apmApmKindAPM_KIND_MODIFY: "modify", apmApmKindAPM_KIND_QP_EVENT: "qp-event",
		apmApmKindAPM_KIND_PORT_EVENT: "port-event", apmApmKindAPM_KIND_CM_NOTIFY: "cm-notify",
		apmApmKindAPM_KIND_CM_HANDLER: "cm-handler", apmApmKindAPM_KIND_MAD: "mad",
		apmApmKindAPM_KIND_QP_CREATE: "qp-create", apmApmKindAPM_KIND_QP_DESTROY: "qp-destroy",
	} {
		if got := event.Kind(k).String(); got != want {
			t.Errorf("BPF kind %d is event kind %q, want %q", k, got, want)
		}
	}
}
