package vm

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// mpiPackages are the Debian packages of Open MPI whose files the guest
// carries (lab/progs/lab-mpi.c runs on ibsim through the openib BTL):
// mpirun/orted, libmpi and the MCA plugins (openib among them), the help
// texts and MCA parameter files, and PMIx with its plugins. hwloc, libevent
// and the rest come along as the ELF files' libraries.
var mpiPackages = []string{"openmpi-bin", "openmpi-common", "libopenmpi3", "libpmix2"}

// mpiSkip are the package paths the guest does not need.
var mpiSkip = []string{"/usr/share/doc/", "/usr/share/man/", "/usr/share/lintian/"}

// addMPI adds every file of mpiPackages: ELF files with their libraries,
// symlinks as symlinks, other files as they are; and mpirun, which Debian
// makes an alternative (/etc/alternatives) at install time.
func addMPI(im *image) error {
	for _, pkg := range mpiPackages {
		out, err := exec.Command("dpkg-query", "-L", pkg).Output()
		if err != nil {
			return fmt.Errorf("listing package %s (run lab/setup-host.sh): %w", pkg, err)
		}
		for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if skipMPIFile(f) {
				continue
			}
			st, err := os.Lstat(f)
			if err != nil {
				return fmt.Errorf("package %s: %w", pkg, err)
			}
			switch {
			case st.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(f)
				if err != nil {
					return fmt.Errorf("package %s: %w", pkg, err)
				}
				im.add(source{guest: GuestPath(f), link: target})
			case !st.Mode().IsRegular():
			case IsELF(f):
				im.program(GuestPath(f), f)
			default:
				im.hostFile(GuestPath(f), f)
			}
		}
	}
	im.add(source{guest: "usr/bin/mpirun", link: "mpirun.openmpi"})
	return nil
}

func skipMPIFile(f string) bool {
	for _, p := range mpiSkip {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}
