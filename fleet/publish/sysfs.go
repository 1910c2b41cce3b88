package publish

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/fleet/wire"
	"github.com/apmwatch/apmwatch/internal/portaddr"
)

// portAddrs reads a port's LID, LMC and GIDs from sysfs
// (/sys/class/infiniband/DEV/ports/N/lid, lid_mask_count, gids/I), cached for a minute: a
// subnet manager may hand out LIDs again, rarely.
type portAddrs struct {
	root  string // /sys/class/infiniband
	cache map[portKey]portAddr
}

type portKey struct {
	dev      string
	port     uint32
	gidIndex uint8
}

type portAddr struct {
	gid  string
	lid  uint16
	lmc  uint8
	read time.Time
}

const portAddrTTL = time.Minute

func newPortAddrs(root string) *portAddrs {
	if root == "" {
		root = "/sys/class/infiniband"
	}
	return &portAddrs{root: root, cache: map[portKey]portAddr{}}
}

// lookup returns the port's address (its GID at gidIndex, its LID and
// LMC) and number; a port of 0 means the only port of a one-port device.
func (p *portAddrs) lookup(dev string, port uint32, gidIndex uint8, now time.Time) (wire.Addr, uint32) {
	if dev == "" || strings.ContainsAny(dev, "/\x00") || dev == "." || dev == ".." {
		return wire.Addr{}, port
	}
	if port == 0 {
		ents, err := os.ReadDir(filepath.Join(p.root, dev, "ports"))
		if err != nil || len(ents) != 1 {
			return wire.Addr{}, 0
		}
		n, err := strconv.ParseUint(ents[0].Name(), 10, 32)
		if err != nil {
			return wire.Addr{}, 0
		}
		port = uint32(n)
	}
	k := portKey{dev, port, gidIndex}
	if a, ok := p.cache[k]; ok && now.Sub(a.read) < portAddrTTL {
		return wire.Addr{GID: a.gid, LID: a.lid, LMC: a.lmc}, port
	}
	if len(p.cache) > 4096 { // hostile device names: bounded
		clear(p.cache)
	}
	dir := filepath.Join(p.root, dev, "ports", strconv.FormatUint(uint64(port), 10))
	a := portAddr{read: now, lid: portaddr.LID(dir), lmc: portaddr.LMC(dir)}
	if ip, ok, _ := portaddr.GID(dir, int(gidIndex)); ok {
		a.gid = ip.String()
	}
	p.cache[k] = a
	return wire.Addr{GID: a.gid, LID: a.lid, LMC: a.lmc}, port
}
