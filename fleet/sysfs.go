package fleet

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// portAddrs reads a port's LID and GIDs from sysfs
// (/sys/class/infiniband/DEV/ports/N/lid, gids/I), cached for a minute: a
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
	read time.Time
}

const portAddrTTL = time.Minute

func newPortAddrs(root string) *portAddrs {
	if root == "" {
		root = "/sys/class/infiniband"
	}
	return &portAddrs{root: root, cache: map[portKey]portAddr{}}
}

// lookup returns the port's GID at gidIndex and its LID; a port of 0 means
// the only port of a one-port device.
func (p *portAddrs) lookup(dev string, port uint32, gidIndex uint8, now time.Time) (string, uint16, uint32) {
	if dev == "" || strings.ContainsAny(dev, "/\x00") || dev == "." || dev == ".." {
		return "", 0, port
	}
	if port == 0 {
		ents, err := os.ReadDir(filepath.Join(p.root, dev, "ports"))
		if err != nil || len(ents) != 1 {
			return "", 0, 0
		}
		n, err := strconv.ParseUint(ents[0].Name(), 10, 32)
		if err != nil {
			return "", 0, 0
		}
		port = uint32(n)
	}
	k := portKey{dev, port, gidIndex}
	if a, ok := p.cache[k]; ok && now.Sub(a.read) < portAddrTTL {
		return a.gid, a.lid, port
	}
	if len(p.cache) > 4096 { // hostile device names: bounded
		clear(p.cache)
	}
	dir := filepath.Join(p.root, dev, "ports", strconv.FormatUint(uint64(port), 10))
	a := portAddr{read: now}
	if b, err := readSmall(filepath.Join(dir, "lid")); err == nil {
		s := strings.TrimPrefix(strings.TrimSpace(string(b)), "0x")
		if v, err := strconv.ParseUint(s, 16, 16); err == nil {
			a.lid = uint16(v)
		}
	}
	if b, err := readSmall(filepath.Join(dir, "gids", strconv.Itoa(int(gidIndex)))); err == nil {
		if ip, err := netip.ParseAddr(strings.TrimSpace(string(b))); err == nil && ip.Is6() && !ip.IsUnspecified() {
			a.gid = ip.String()
		}
	}
	p.cache[k] = a
	return a.gid, a.lid, port
}

// readSmall reads at most 256 bytes of a sysfs attribute.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 256)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return nil, err
	}
	return b[:n], nil
}
