package actuator

import (
	"strings"
	"testing"
)

// allowsCgroup runs the allowlist on an owner in cgroup cg.
func allowsCgroup(t *testing.T, a Allow, cg string) (bool, string) {
	t.Helper()
	return Policy{Allow: a}.allows("mlx5_0", Owner{PID: 7, Comm: "app", Cgroup: cg})
}

// A unit of allow.units is trusted only where systemd (root) puts system
// units: right under /system.slice, or under its nested slices. A user can
// make a cgroup or a user unit of any name under their own slice.
func TestUnitUnderSystemSlice(t *testing.T) {
	a := Allow{Units: []string{"myapp.service"}}
	for _, tc := range []struct {
		cg string
		ok bool
	}{
		{"/system.slice/myapp.service", true},
		{"/system.slice/myapp.service/worker", true}, // a delegated unit's own subtree
		{"/system.slice/system-myapp.slice/myapp.service", true},
		{"/system.slice/a.slice/b.slice/myapp.service/x", true},
		// Spoofs: the name anywhere else.
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/myapp.service", false},
		{"/user.slice/user-1000.slice/myapp.service", false},
		{"/myapp.service", false},
		{"/machine.slice/myapp.service", false},
		{"/system.slice/other.service/myapp.service", false}, // inside another (delegated) unit
		{"/system.slice/other.service/x.slice/myapp.service", false},
		{"/kubepods.slice/myapp.service", false},
		{"/system.slice/myapp.service.d", false},
		{"/system.slice", false},
		{"system.slice/myapp.service", false}, // not absolute
		{"", false},
	} {
		ok, why := allowsCgroup(t, a, tc.cg)
		if ok != tc.ok || (!ok && !strings.Contains(why, "allow.units")) {
			t.Errorf("unit myapp.service, cgroup %q: %v %q, want %v", tc.cg, ok, why, tc.ok)
		}
	}
}

// A pod of allow.pods is trusted only at the place the kubelet makes its
// cgroup, from the root of the hierarchy: the cgroupfs driver's
// /kubepods/[besteffort|burstable/]pod<uid> and the systemd driver's
// /kubepods.slice/[kubepods-<qos>.slice/]kubepods-[<qos>-]pod<uid with _>.slice.
func TestPodUnderKubepods(t *testing.T) {
	const uid = "1b2c3d4e-0000-4000-8000-000000000001"
	const us = "1b2c3d4e_0000_4000_8000_000000000001"
	a := Allow{Pods: []string{strings.ToUpper(uid)}}
	for _, tc := range []struct {
		cg string
		ok bool
	}{
		{"/kubepods/pod" + uid, true},
		{"/kubepods/pod" + uid + "/ab12", true},
		{"/kubepods/besteffort/pod" + uid + "/ab12", true},
		{"/kubepods/burstable/pod" + uid + "/ab12", true},
		{"/kubepods.slice/kubepods-pod" + us + ".slice/cri-containerd-ab12.scope", true},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + us + ".slice/cri-containerd-ab12.scope", true},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + us + ".slice", true},
		// Spoofs: the pod's name below a user's own cgroup, or out of place.
		{"/user.slice/user-1000.slice/user@1000.service/kubepods/pod" + uid + "/x", false},
		{"/user.slice/user-1000.slice/user@1000.service/kubepods.slice/kubepods-pod" + us + ".slice/x", false},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods-burstable-pod" + us + ".slice", false},
		{"/user.slice/pod" + uid, false},
		{"/system.slice/x.service/pod" + uid, false},
		{"/kubepods/other/pod" + uid, false},                              // no such qos class
		{"/kubepods/burstable/x/pod" + uid, false},                        // not at the pod's depth
		{"/kubepods/pod" + us, false},                                     // cgroupfs keeps the dashes
		{"/kubepods/podother/pod" + uid, false},                           // a pod's own subtree
		{"/kubepods.slice/kubepods-burstable-pod" + us + ".slice", false}, // qos pod outside its qos slice
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-burstable-pod" + us + ".slice", false},
		{"/kubepods.slice/kubepods-burstable.slice/x.slice/kubepods-burstable-pod" + us + ".slice", false},
		{"/kubepods.slice/kubepods-pod" + uid + ".slice", false}, // systemd escapes the dashes
		{"/kubepods.slice/kubepods-pod" + us + ".slice.d", false},
		{"/kubepods/pod1b2c3d4e-0000-4000-8000-000000000002", false},
		{"", false},
	} {
		ok, why := allowsCgroup(t, a, tc.cg)
		if ok != tc.ok || (!ok && !strings.Contains(why, "allow.pods")) {
			t.Errorf("pod %s, cgroup %q: %v %q, want %v", uid, tc.cg, ok, why, tc.ok)
		}
	}
}
