package vm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Guest directories for the project's artifacts.
const (
	guestBin  = "usr/local/bin" // apmwatch, lab programs, guest.test
	guestKmod = "lib/lab-kmod"  // the test module(s), loaded after rdma_rxe
)

// rdmaPackages are the Debian packages whose ELF programs go on the guest's
// PATH (infiniband-diags only if installed).
var rdmaPackages = []string{"ibverbs-utils", "rdmacm-utils", "perftest", "infiniband-diags"}

// BuildInitramfs writes the base initramfs of kernel k unless its inputs
// are unchanged since the last build (a content hash kept beside it). It
// returns the path and whether it was rebuilt.
func BuildInitramfs(p Paths, k Kernel) (string, bool, error) {
	im, err := collect(p, k)
	if err != nil {
		return "", false, fmt.Errorf("collecting the %s image: %w", k.Name, err)
	}
	sum, err := im.hash()
	if err != nil {
		return "", false, err
	}
	out := p.Initramfs(k.Name)
	stamp := out + ".sha256"
	if old, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(old)) == sum {
		if _, err := os.Stat(out); err == nil {
			return out, false, nil
		}
	}
	a, err := im.archive()
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", false, err
	}
	if err := writeAtomic(out, a.WriteTo); err != nil {
		return "", false, fmt.Errorf("writing %s: %w", out, err)
	}
	if err := os.WriteFile(stamp, []byte(sum+"\n"), 0o644); err != nil {
		return "", false, err
	}
	return out, true, nil
}

// collect lists every file of the image of kernel k.
func collect(p Paths, k Kernel) (*image, error) {
	im := &image{files: map[string]source{}}
	im.hostFile("init", filepath.Join(p.Repo, "lab", "initramfs", "init"))
	im.hostFile("usr/local/share/lab/demo.sh", filepath.Join(p.Repo, "lab", "initramfs", "demo.sh"))
	im.add(source{guest: "etc/lab/kernel", data: []byte(k.Name + "\n"), mode: 0o644})
	im.add(source{guest: "etc/passwd", data: []byte("root:x:0:0:root:/root:/bin/sh\n"), mode: 0o644})
	im.add(source{guest: "etc/group", data: []byte("root:x:0:\n"), mode: 0o644})
	im.add(source{guest: "etc/hosts", data: []byte("127.0.0.1 localhost\n"), mode: 0o644})

	if err := addBusybox(im); err != nil {
		return nil, err
	}
	// Debian's static busybox prefers its own applets to $PATH (so its
	// sh would run busybox ip, not iproute2's): sh is dash, and bash is
	// there for the interactive shell.
	for _, tool := range []string{"ip", "rdma", "dash", "bash"} {
		host, err := findHost(tool, "/usr/bin", "/usr/sbin", "/bin", "/sbin")
		if err != nil {
			return nil, err
		}
		im.program("usr/bin/"+tool, host)
	}
	im.add(source{guest: "usr/bin/sh", link: "dash"})
	// glibc dlopens libgcc_s for pthread_exit and cancellation; ldd never names it.
	if gcc, err := findHost("libgcc_s.so.1", "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"); err == nil {
		im.program("usr/lib/x86_64-linux-gnu/libgcc_s.so.1", gcc)
	} else {
		return nil, err
	}
	if err := addRDMACore(im); err != nil {
		return nil, err
	}
	if err := addMPI(im); err != nil {
		return nil, err
	}
	// bpftool, when the host has it, for looking at BPF from inside the guest.
	if f, err := findHost("bpftool", "/usr/sbin", "/usr/bin"); err == nil {
		im.program("usr/sbin/bpftool", f)
	}
	if err := addSystemd(im); err != nil {
		return nil, err
	}
	if err := addModules(im, k); err != nil {
		return nil, err
	}
	addArtifacts(im, p, k)
	if err := addBTF(im, p, k); err != nil {
		return nil, err
	}
	return im, im.err
}

func findHost(name string, dirs ...string) (string, error) {
	for _, d := range dirs {
		f := filepath.Join(d, name)
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			return f, nil
		}
	}
	return "", fmt.Errorf("%s not found on the host (run lab/setup-host.sh)", name)
}

// addBusybox adds the static busybox and a link for each applet that no real
// program of the image replaces.
func addBusybox(im *image) error {
	bb, err := findHost("busybox", "/bin", "/usr/bin")
	if err != nil {
		return err
	}
	im.hostFile("usr/bin/busybox", bb)
	out, err := exec.Command(bb, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("listing busybox applets: %w", err)
	}
	for _, a := range strings.Fields(string(out)) {
		g := GuestPath("/" + a)
		if path.Base(g) == "busybox" || path.Base(g) == "ip" {
			continue
		}
		im.add(source{guest: g, link: "/usr/bin/busybox"})
	}
	return nil
}

// addRDMACore adds the rdma-core programs and the providers of the guest's devices.
func addRDMACore(im *image) error {
	for _, pkg := range rdmaPackages {
		out, err := exec.Command("dpkg-query", "-L", pkg).Output()
		if err != nil {
			if pkg == "infiniband-diags" {
				continue
			}
			return fmt.Errorf("listing package %s (run lab/setup-host.sh): %w", pkg, err)
		}
		for _, f := range strings.Fields(string(out)) {
			dir := path.Dir(f)
			if (dir == "/usr/bin" || dir == "/usr/sbin") && IsELF(f) {
				im.program(GuestPath(f), f)
			}
		}
	}
	for _, prov := range guestProviders {
		libs, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/libibverbs/" + prov.lib + "-*.so")
		if len(libs) == 0 {
			return fmt.Errorf("libibverbs provider %s-*.so not found (install ibverbs-providers)", prov.lib)
		}
		for _, f := range libs {
			im.program(GuestPath(f), f)
		}
		im.hostFile("etc/libibverbs.d/"+prov.driver, "/etc/libibverbs.d/"+prov.driver)
	}
	return nil
}

// guestProviders are the libibverbs providers the guest's devices bind:
// rxe for soft-RoCE, ipathverbs (qib's) for ibsim.
var guestProviders = []struct{ lib, driver string }{
	{"librxe", "rxe.driver"},
	{"libipathverbs", "ipathverbs.driver"},
}

// addModules adds the RDMA modules (decompressed) and their load order in
// /etc/lab/modules.
func addModules(im *image, k Kernel) error {
	depf, err := os.Open(filepath.Join(k.ModulesDir(), "modules.dep"))
	if err != nil {
		return err
	}
	defer depf.Close()
	deps, err := ParseModulesDep(depf)
	if err != nil {
		return err
	}
	builtin := map[string]bool{}
	if bf, err := os.Open(filepath.Join(k.ModulesDir(), "modules.builtin")); err == nil {
		builtin, err = ParseBuiltin(bf)
		bf.Close()
		if err != nil {
			return err
		}
	}
	order, err := deps.LoadOrder(RDMAModules, builtin)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", k.Version, err)
	}
	var list bytes.Buffer
	for _, m := range order {
		guest := path.Join("lib/modules", k.Version, strings.TrimSuffix(m, ".xz"))
		im.add(source{guest: guest, host: filepath.Join(k.ModulesDir(), m), xz: strings.HasSuffix(m, ".xz"), mode: 0o644})
		fmt.Fprintf(&list, "/%s\n", guest)
	}
	im.add(source{guest: "etc/lab/modules", data: list.Bytes(), mode: 0o644})
	return nil
}

// addArtifacts adds what the project built, when present: bin/apmwatch,
// $(BUILD)/lab/bin/*, $(BUILD)/lab/guest.test and $(BUILD)/lab/<kernel>/*.ko.
func addArtifacts(im *image, p Paths, k Kernel) {
	if f := filepath.Join(p.Repo, "bin", "apmwatch"); exists(f) {
		im.program(guestBin+"/apmwatch", f)
	}
	progs, _ := filepath.Glob(filepath.Join(p.Build, "lab", "bin", "*"))
	for _, f := range progs {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			if IsELF(f) {
				im.program(guestBin+"/"+filepath.Base(f), f)
			} else {
				im.hostFile(guestBin+"/"+filepath.Base(f), f)
			}
		}
	}
	if f := filepath.Join(p.Build, "lab", "guest.test"); exists(f) {
		im.program(guestBin+"/guest.test", f)
	}
	addPkgRoot(im, p)
	kos, _ := filepath.Glob(filepath.Join(p.Build, "lab", k.Name, "*.ko"))
	for _, f := range kos {
		im.hostFile(guestKmod+"/"+filepath.Base(f), f)
	}
}

func exists(f string) bool {
	st, err := os.Stat(f)
	return err == nil && st.Mode().IsRegular()
}
