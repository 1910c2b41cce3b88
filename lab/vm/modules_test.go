package vm

import (
	"reflect"
	"strings"
	"testing"
)

const sampleDep = `kernel/fs/configfs/configfs.ko.xz:
kernel/net/ipv4/udp_tunnel.ko.xz:
kernel/net/ipv6/ip6_udp_tunnel.ko.xz:
kernel/drivers/infiniband/core/ib_core.ko.xz:
kernel/drivers/infiniband/core/ib_uverbs.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz
kernel/drivers/infiniband/core/ib_cm.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz
kernel/drivers/infiniband/core/iw_cm.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz
kernel/drivers/infiniband/core/rdma_cm.ko.xz: kernel/drivers/infiniband/core/iw_cm.ko.xz kernel/drivers/infiniband/core/ib_cm.ko.xz kernel/drivers/infiniband/core/ib_core.ko.xz kernel/fs/configfs/configfs.ko.xz
kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: kernel/drivers/infiniband/core/ib_uverbs.ko.xz kernel/drivers/infiniband/core/ib_core.ko.xz kernel/net/ipv6/ip6_udp_tunnel.ko.xz kernel/net/ipv4/udp_tunnel.ko.xz
`

func TestLoadOrderPutsDependenciesFirst(t *testing.T) {
	deps, err := ParseModulesDep(strings.NewReader(sampleDep))
	if err != nil {
		t.Fatal(err)
	}
	order, err := deps.LoadOrder([]string{"rdma_rxe", "rdma-cm", "crc32_generic"}, map[string]bool{"crc32_generic": true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range order {
		names = append(names, ModuleName(p))
	}
	want := []string{"udp_tunnel", "ip6_udp_tunnel", "ib_core", "ib_uverbs", "rdma_rxe", "configfs", "ib_cm", "iw_cm", "rdma_cm"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("load order\n got %v\nwant %v", names, want)
	}
}

func TestLoadOrderRejectsUnknownModules(t *testing.T) {
	deps, _ := ParseModulesDep(strings.NewReader(sampleDep))
	if _, err := deps.LoadOrder([]string{"no_such_mod"}, nil); err == nil {
		t.Error("want an error for a module that is neither in modules.dep nor built in")
	}
	broken := ModuleDeps{"a.ko": {"missing.ko"}}
	if _, err := broken.LoadOrder([]string{"a"}, nil); err == nil {
		t.Error("want an error for a dependency missing from modules.dep")
	}
	if _, err := ParseModulesDep(strings.NewReader("no colon here\n")); err == nil {
		t.Error("want an error for a malformed line")
	}
}

func TestParseBuiltin(t *testing.T) {
	got, err := ParseBuiltin(strings.NewReader("kernel/crypto/crc32_generic.ko\nkernel/fs/config-fs.ko\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !got["crc32_generic"] || !got["config_fs"] || len(got) != 2 {
		t.Errorf("got %v", got)
	}
}

func TestLoadOrderOptionalModules(t *testing.T) {
	deps, err := ParseModulesDep(strings.NewReader(sampleDep))
	if err != nil {
		t.Fatal(err)
	}
	// 7.2 has no crc32_generic: skipped, not an error.
	if _, err := deps.LoadOrder([]string{"crc32_generic", "rdma_rxe"}, nil); err != nil {
		t.Errorf("a missing optional module: %v", err)
	}
	if _, err := deps.LoadOrder([]string{"no_such_module"}, nil); err == nil {
		t.Error("a missing module that is not optional: want an error")
	}
}
