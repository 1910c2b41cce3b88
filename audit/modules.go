package audit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/apmwatch/apmwatch/event"
)

// modWatch notices ib modules loaded, unloaded or reloaded since the probes
// were attached. A kprobe on a module function dies with the module and
// does not come back when it is loaded again; a hook that was missing
// because its module was not loaded can be attached once it is. Either way
// the probes must be planned and attached again. (fentry/fexit hold a
// reference on their module, so a module they are attached to cannot be
// unloaded at all while the daemon runs.)
//
// A module's identity is the inode of /sys/module/NAME: sysfs gives every
// new directory a new inode number, so a reload changes it.
type modWatch struct {
	root string
	ids  map[string]uint64 // 0: not loaded
}

// newModWatch watches the modules of hooks, from their state in before
// (taken before the probes were planned, so that a module loaded while they
// were being attached counts as a change).
func newModWatch(root string, hooks []event.Hook, before map[string]uint64) *modWatch {
	w := &modWatch{root: root, ids: map[string]uint64{}}
	for _, h := range hooks {
		if h.Module != "" {
			w.ids[h.Module] = before[h.Module]
		}
	}
	return w
}

// moduleIDs reads the identity of every module under root.
func moduleIDs(root string) map[string]uint64 {
	ents, _ := os.ReadDir(root)
	w := &modWatch{root: root}
	out := make(map[string]uint64, len(ents))
	for _, e := range ents {
		if id := w.id(e.Name()); id != 0 {
			out[e.Name()] = id
		}
	}
	return out
}

func (w *modWatch) id(name string) uint64 {
	fi, err := os.Stat(filepath.Join(w.root, name))
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 1
}

// changed reports what changed since the last call ("" for nothing), such
// as "ib_cm reloaded, mlx5_ib loaded".
func (w *modWatch) changed() string {
	var what []string
	for name, old := range w.ids {
		cur := w.id(name)
		switch {
		case cur == old:
			continue
		case old == 0:
			what = append(what, name+" loaded")
		case cur == 0:
			what = append(what, name+" unloaded")
		default:
			what = append(what, name+" reloaded")
		}
		w.ids[name] = cur
	}
	slices.Sort(what)
	return strings.Join(what, ", ")
}
