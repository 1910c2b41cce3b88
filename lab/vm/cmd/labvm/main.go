// Command labvm builds the lab's guest images and boots them in qemu.
//
//	labvm assets -kernel 6.12          build the initramfs if its inputs changed
//	labvm run -kernel 6.12 -cmd 'ibv_devices' [-extra dir]
//	labvm shell -kernel 6.1
//
// Paths come from the environment as the Makefile exports them: CACHE,
// BUILD, and the source tree is the working directory. run exits with the
// command's status; a failure of the lab itself exits 125.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/apmwatch/apmwatch/lab/vm"
)

const labFailure = 125

func main() {
	os.Exit(run(os.Args[1:]))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: labvm assets|run|shell -kernel 5.10|6.1|6.12|7.2 [-cmd CMD] [-extra DIR]")
}

func run(args []string) int {
	if len(args) == 0 {
		usage()
		return 2
	}
	verb := args[0]
	fl := flag.NewFlagSet("labvm "+verb, flag.ContinueOnError)
	kernel := fl.String("kernel", envOr("KERNEL", vm.DefaultKernel), "lab kernel: 5.10, 6.1, 6.12 or 7.2")
	cmdline := fl.String("cmd", os.Getenv("CMD"), "command to run in the guest (run)")
	extra := fl.String("extra", os.Getenv("LAB_EXTRA"), "host directory shown read-only at /extra")
	if err := fl.Parse(args[1:]); err != nil {
		return 2
	}
	if err := vm.CheckKernelName(*kernel); err != nil {
		fmt.Fprintf(os.Stderr, "labvm: %v\n", err)
		return 2
	}
	paths, err := lookupPaths()
	if err != nil {
		fmt.Fprintf(os.Stderr, "labvm: %v\n", err)
		return labFailure
	}
	switch verb {
	case "assets":
		return assets(paths, *kernel)
	case "run", "shell":
		return boot(paths, *kernel, *cmdline, *extra, verb == "shell")
	default:
		usage()
		return 2
	}
}

func assets(p vm.Paths, name string) int {
	k, err := vm.LoadKernel(p, name)
	if err != nil {
		return fail(fmt.Errorf("building the %s image: %w", name, err))
	}
	start := time.Now()
	out, rebuilt, err := vm.BuildInitramfs(p, k)
	if err != nil {
		return fail(fmt.Errorf("building the %s image: %w", name, err))
	}
	// A kernel without module BTF: btf gen runs in a guest of the image
	// just built, and the image is built again with its files.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if ran, err := vm.PrepareBTF(ctx, p, k, os.Stderr); err != nil {
		return fail(fmt.Errorf("building the %s image: %w", name, err))
	} else if ran {
		if out, rebuilt, err = vm.BuildInitramfs(p, k); err != nil {
			return fail(fmt.Errorf("building the %s image: %w", name, err))
		}
	}
	if rebuilt {
		size := int64(0)
		if st, err := os.Stat(out); err == nil {
			size = st.Size()
		}
		fmt.Fprintf(os.Stderr, "labvm: built %s for %s (%.1f MiB) in %.1fs\n",
			out, k.Version, float64(size)/(1<<20), time.Since(start).Seconds())
	}
	return 0
}

func boot(p vm.Paths, kernel, cmdline, extra string, shell bool) int {
	if !shell && cmdline == "" {
		fmt.Fprintln(os.Stderr, "labvm: no command: set CMD='shell command' (or use lab-shell)")
		return 2
	}
	c := vm.RunConfig{
		Paths: p, Kernel: kernel, Cmd: cmdline, Extra: extra, Shell: shell,
		Accel: os.Getenv("LAB_ACCEL"), Verbose: os.Getenv("LAB_VERBOSE") != "", Systemd: os.Getenv("LAB_INIT") == "systemd",
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
	var err error
	if !shell {
		if c.Timeout, err = seconds("LAB_TIMEOUT", 900); err != nil {
			fmt.Fprintf(os.Stderr, "labvm: %v\n", err)
			return 2
		}
		if c.BootTimeout, err = seconds("LAB_BOOT_TIMEOUT", 180); err != nil {
			fmt.Fprintf(os.Stderr, "labvm: %v\n", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	status, err := vm.Run(ctx, c)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted, qemu killed: %w", err)
		} else if errors.Is(err, vm.ErrTimeout) {
			err = fmt.Errorf("%w (qemu killed)", err)
		}
		return fail(err)
	}
	return status
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "labvm: FAILED: %v\n", err)
	return labFailure
}

func seconds(env string, def int) (time.Duration, error) {
	v := os.Getenv(env)
	if v == "" {
		return time.Duration(def) * time.Second, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of seconds", env, v)
	}
	return time.Duration(n) * time.Second, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func lookupPaths() (vm.Paths, error) {
	repo, err := os.Getwd()
	if err != nil {
		return vm.Paths{}, err
	}
	p := vm.Paths{Repo: repo, Cache: envOr("CACHE", repo+"/.cache"), Build: envOr("BUILD", repo+"/build")}
	if _, err := os.Stat(repo + "/lab/initramfs/init"); err != nil {
		return p, fmt.Errorf("run labvm from the source tree: %w", err)
	}
	return p, nil
}
