package actuator

import (
	"fmt"
	"slices"
	"strings"
)

// validate checks the allowlist's entries.
func (a Allow) validate() []string {
	var errs []string
	if len(a.Devices)+len(a.Comms)+len(a.PIDs)+len(a.UIDs)+len(a.Cgroups)+len(a.Units)+len(a.Pods) == 0 {
		errs = append(errs, "allow needs at least one device, comm, pid, uid, cgroup, unit or pod (an empty allowlist allows nothing)")
	}
	for name, n := range map[string]int{"devices": len(a.Devices), "comms": len(a.Comms), "pids": len(a.PIDs),
		"uids": len(a.UIDs), "cgroups": len(a.Cgroups), "units": len(a.Units), "pods": len(a.Pods)} {
		if n > maxListItems {
			errs = append(errs, fmt.Sprintf("allow.%s: more than %d entries", name, maxListItems))
		}
	}
	for _, c := range a.Cgroups {
		if !strings.HasPrefix(c, "/") || strings.Contains(c, "//") || strings.Contains(c, "\n") {
			errs = append(errs, fmt.Sprintf("allow.cgroups: %q is not an absolute cgroup path", c))
		}
	}
	for _, u := range a.Units {
		if u == "" || strings.ContainsAny(u, "/\n") || !strings.Contains(u, ".") {
			errs = append(errs, fmt.Sprintf("allow.units: %q is not a systemd unit name (myapp.service)", u))
		}
	}
	for _, p := range a.Pods {
		if p == "" || strings.Trim(strings.ToLower(p), "0123456789abcdef-") != "" {
			errs = append(errs, fmt.Sprintf("allow.pods: %q is not a pod uid", p))
		}
	}
	return errs
}

// allows checks the allowlist against a QP's device and owner; the reason
// says what did not match.
func (p Policy) allows(device string, o Owner) (bool, string) {
	a := p.Allow
	if len(a.Devices) > 0 && !slices.Contains(a.Devices, device) {
		return false, fmt.Sprintf("device %s not in allow.devices", device)
	}
	if len(a.Comms) > 0 && !slices.Contains(a.Comms, o.Comm) {
		return false, fmt.Sprintf("comm %q not in allow.comms", o.Comm)
	}
	if len(a.PIDs) > 0 && !slices.Contains(a.PIDs, o.PID) {
		return false, fmt.Sprintf("pid %d not in allow.pids", o.PID)
	}
	if len(a.UIDs) > 0 {
		if len(o.UIDs) == 0 {
			return false, "owner uid unknown, allow.uids cannot match"
		}
		for _, u := range o.UIDs {
			if !slices.Contains(a.UIDs, u) {
				return false, fmt.Sprintf("owner uids %v not all in allow.uids", o.UIDs)
			}
		}
	}
	if len(a.Cgroups) > 0 && !slices.ContainsFunc(a.Cgroups, func(c string) bool { return underCgroup(o.Cgroup, c) }) {
		return false, fmt.Sprintf("cgroup %q not in or below allow.cgroups", o.Cgroup)
	}
	if len(a.Units) > 0 && !slices.ContainsFunc(a.Units, func(u string) bool { return unitUnderSystemSlice(o.Cgroup, u) }) {
		return false, fmt.Sprintf("cgroup %q not in a system unit of allow.units (under /system.slice)", o.Cgroup)
	}
	if len(a.Pods) > 0 && !slices.ContainsFunc(a.Pods, func(u string) bool { return podUnderKubepods(o.Cgroup, u) }) {
		return false, fmt.Sprintf("cgroup %q not in a pod of allow.pods (under the kubelet's /kubepods or /kubepods.slice)", o.Cgroup)
	}
	return true, ""
}

// underCgroup: cg is dir or below it.
func underCgroup(cg, dir string) bool {
	dir = strings.TrimSuffix(dir, "/")
	return cg != "" && (cg == dir || dir == "" || strings.HasPrefix(cg, dir+"/"))
}

// unitUnderSystemSlice: cg is the unit's cgroup, or below it, where
// systemd (root) puts system units: right under /system.slice or under the
// slices nested in it (/system.slice/system-getty.slice/getty@tty1.service).
// A user can name a cgroup or a user unit anything under their own slice
// (/user.slice/.../user@1000.service/app.slice/myapp.service), and a unit
// with Delegate=yes anything below itself: neither is a system unit.
func unitUnderSystemSlice(cg, unit string) bool {
	c := strings.Split(cg, "/")
	if len(c) < 3 || c[0] != "" || c[1] != "system.slice" {
		return false
	}
	for _, s := range c[2:] {
		if s == unit {
			return true
		}
		if !strings.HasSuffix(s, ".slice") {
			return false // inside another unit
		}
	}
	return false
}

// podUnderKubepods: cg is the pod's cgroup, or below it, where the kubelet
// makes it, from the root of the hierarchy: the cgroupfs driver's
// /kubepods/[besteffort/|burstable/]pod<uid> or the systemd driver's
// /kubepods.slice/[kubepods-<qos>.slice/]kubepods-[<qos>-]pod<uid with _>.slice.
// The same names anywhere else are anyone's.
func podUnderKubepods(cg, uid string) bool {
	uid = strings.ToLower(uid)
	c := strings.Split(cg, "/")
	if len(c) < 3 || c[0] != "" {
		return false
	}
	switch c[1] {
	case "kubepods":
		if c[2] == "besteffort" || c[2] == "burstable" {
			c = c[1:]
		}
		return len(c) >= 3 && c[2] == "pod"+uid
	case "kubepods.slice":
		esc := strings.ReplaceAll(uid, "-", "_")
		if c[2] == "kubepods-pod"+esc+".slice" {
			return true
		}
		for _, qos := range []string{"besteffort", "burstable"} {
			if c[2] == "kubepods-"+qos+".slice" {
				return len(c) >= 4 && c[3] == "kubepods-"+qos+"-pod"+esc+".slice"
			}
		}
	}
	return false
}
