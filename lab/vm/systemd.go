package vm

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// systemdPrograms are Debian's systemd programs the guest carries, so that
// a guest test can start the packaged units under a real service manager
// (systemd as PID 1 of a PID namespace; docs/lab.md).
var systemdPrograms = []string{
	"/usr/lib/systemd/systemd",
	"/usr/lib/systemd/systemd-journald",
	"/usr/lib/systemd/systemd-shutdown",
	"/usr/bin/systemctl",
	"/usr/bin/journalctl",
	"/usr/bin/systemd-analyze",
}

// systemdUnits are the host's unit files the guest's systemd starts from:
// every target (without their .wants directories: nothing else starts) and
// the journal, so a unit's output can be read with journalctl.
var systemdUnits = []string{
	"*.target",
	"systemd-journald.service",
	"systemd-journald.socket",
	"systemd-journald-dev-log.socket",
}

// addSystemd adds systemd's manager, tools and units from the host.
func addSystemd(im *image) error {
	for _, f := range systemdPrograms {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			return errNotOnHost(f)
		}
		im.program(GuestPath(f), real)
	}
	for _, pat := range systemdUnits {
		units, _ := filepath.Glob(filepath.Join("/usr/lib/systemd/system", pat))
		if len(units) == 0 {
			return errNotOnHost(filepath.Join("/usr/lib/systemd/system", pat))
		}
		for _, u := range units {
			real, err := filepath.EvalSymlinks(u)
			if err != nil {
				return errNotOnHost(u)
			}
			im.hostFile(GuestPath(u), real)
		}
	}
	// The journal starts with the manager, as on a Debian host (the
	// audit socket is left out: the lab kernel's audit is not the point).
	for _, l := range []string{"sockets.target.wants/systemd-journald.socket",
		"sockets.target.wants/systemd-journald-dev-log.socket", "sysinit.target.wants/systemd-journald.service"} {
		im.add(source{guest: GuestPath("/usr/lib/systemd/system/" + l), link: "../" + filepath.Base(l)})
	}
	return nil
}

func errNotOnHost(f string) error {
	return fmt.Errorf("%s not found on the host (run lab/setup-host.sh)", f)
}

// guestPkgRoot is where the guest finds the unpacked .deb (make lab-pkgroot):
// a guest test installs it into / before it starts the units.
const guestPkgRoot = "usr/local/share/lab/pkgroot"

// addPkgRoot adds the unpacked package tree $(BUILD)/lab/pkgroot, when
// present, below guestPkgRoot.
func addPkgRoot(im *image, p Paths) {
	root := filepath.Join(p.Build, "lab", "pkgroot")
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return
	}
	err := filepath.WalkDir(root, func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, f)
		if err != nil || rel == "." {
			return err
		}
		guest := path.Join(guestPkgRoot, filepath.ToSlash(rel))
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(f)
			if err != nil {
				return err
			}
			im.add(source{guest: guest, link: target})
		case t.IsRegular():
			im.hostFile(guest, f)
		}
		return nil
	})
	if err != nil {
		im.fail(fmt.Errorf("adding the package tree %s: %w", root, err))
	}
}
