package vm

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseLdd(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n" +
		"\tlibibverbs.so.1 => /lib/x86_64-linux-gnu/libibverbs.so.1 (0x00007f)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n"
	got, err := ParseLdd([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/lib/x86_64-linux-gnu/libibverbs.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
	if got, err := ParseLdd([]byte("\tnot a dynamic executable\n")); err != nil || len(got) != 0 {
		t.Errorf("static program: got %v, %v", got, err)
	}
	if _, err := ParseLdd([]byte("\tlibfoo.so.1 => not found\n")); err == nil {
		t.Error("missing library: want an error")
	}
}

func TestGuestPath(t *testing.T) {
	for in, want := range map[string]string{
		"/lib/x86_64-linux-gnu/libc.so.6": "usr/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2":     "usr/lib64/ld-linux-x86-64.so.2",
		"sbin/ip":                         "usr/sbin/ip",
		"/usr/bin/ibv_devices":            "usr/bin/ibv_devices",
		"etc/libibverbs.d/rxe.driver":     "etc/libibverbs.d/rxe.driver",
		"libexec/x":                       "libexec/x",
	} {
		if got := GuestPath(in); got != want {
			t.Errorf("GuestPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseControl(t *testing.T) {
	c, ok := ParseControl(`@lab stage=init kernel=6.1.0-57-amd64 uptime=2.78` + "\r")
	if !ok || c["stage"] != "init" || c["kernel"] != "6.1.0-57-amd64" || c["uptime"] != "2.78" {
		t.Errorf("got %v %v", c, ok)
	}
	c, ok = ParseControl(`@lab fail="insmod /lib/x.ko" stage=modules`)
	if !ok || c["fail"] != "insmod /lib/x.ko" || c["stage"] != "modules" {
		t.Errorf("quoted value: got %v %v", c, ok)
	}
	if n, ok := (Control{"exit": "3"}).Exit(); !ok || n != 3 {
		t.Errorf("exit=3: got %d %v", n, ok)
	}
	for _, bad := range []string{"exit=3", "@lab", `@lab fail="open`, "@lab =x", "plain output"} {
		if c, ok := ParseControl(bad); ok && len(c) > 0 {
			t.Errorf("ParseControl(%q) = %v, want no control line", bad, c)
		}
	}
	for _, v := range []string{"x", "-1", "256"} {
		if _, ok := (Control{"exit": v}).Exit(); ok {
			t.Errorf("exit=%s accepted", v)
		}
	}
}

func TestQemuArgs(t *testing.T) {
	args, err := QemuArgs(Boot{Kernel: "vmlinuz", Initrd: "initrd", Quiet: true,
		Console: "file:/dev/fd/3", Output: "file:/dev/fd/4"})
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(args, " ")
	for _, want := range []string{"-accel tcg -cpu max", "-m 2048 -smp 2", "-nographic", "-nodefaults", "-no-reboot",
		"-kernel vmlinuz -initrd initrd", "-serial file:/dev/fd/3 -serial file:/dev/fd/4 -serial null", "quiet"} {
		if !strings.Contains(s, want) {
			t.Errorf("args lack %q: %s", want, s)
		}
	}
	if slices.Contains(args, "-nic") || slices.Contains(args, "-netdev") || slices.Contains(args, "-enable-kvm") {
		t.Errorf("unexpected network or kvm arguments: %s", s)
	}
	args, _ = QemuArgs(Boot{Kernel: "k", Initrd: "i", Accel: "kvm", Shell: true, Quiet: true})
	s = strings.Join(args, " ")
	if !strings.Contains(s, "-accel kvm -cpu max") || !strings.Contains(s, "-serial mon:stdio") || strings.Contains(s, "loglevel") {
		t.Errorf("kvm shell args: %s", s)
	}
	if _, err := QemuArgs(Boot{Accel: "hvf"}); err == nil {
		t.Error("unknown accelerator: want an error")
	}
}

func TestCheckKernelName(t *testing.T) {
	for _, k := range Kernels {
		if err := CheckKernelName(k); err != nil {
			t.Error(err)
		}
	}
	for _, k := range []string{"", "6.2", "6.12.1", "amd64"} {
		if err := CheckKernelName(k); err == nil {
			t.Errorf("kernel %q accepted", k)
		}
	}
}

func TestConsoleTail(t *testing.T) {
	log := t.TempDir() + "/console.log"
	var b strings.Builder
	b.WriteString("\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16.2)\r\n")
	for i := range 40 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	writeFile(t, log, b.String())
	got := consoleTail(log)
	if strings.Contains(got, "\x1b") || strings.Contains(got, "line 9\n") || !strings.Contains(got, "line 39") || !strings.Contains(got, "line 10\n") {
		t.Errorf("tail:\n%s", got)
	}
	writeFile(t, log, "\x1bcSeaBIOS\r\n")
	if got := consoleTail(log); !strings.Contains(got, "  SeaBIOS") || strings.Contains(got, "\x1b") {
		t.Errorf("escapes left: %q", got)
	}
}

// TestBootPanicked: a console that ends in a kernel panic is told from
// one that does not (the runner boots again, once, when the panic came
// before the command).
func TestBootPanicked(t *testing.T) {
	panicked := "[    3.037017] Oops: int3: 0000 [#1] SMP NOPTI\n" +
		"[    3.046321] Kernel panic - not syncing: Fatal exception in interrupt\n"
	if !bootPanicked([]byte(panicked)) {
		t.Error("a kernel panic not seen")
	}
	if bootPanicked([]byte("[    2.1] Run /init as init process\n[    9.0] random: crng init done\n")) {
		t.Error("a panic seen in a clean boot")
	}
}
