package collector

// maxCachedStrings bounds the names a decoder keeps: process names are
// set by any local user, so their number is the host's to choose.
const maxCachedStrings = 4096

// strCache hands out one string per distinct process or device name, so
// decoding a record allocates none: a host has few of either. A small
// direct-mapped table in front of the map answers the names just seen
// with one comparison. When more than maxCachedStrings distinct names
// came, the map starts afresh.
type strCache struct {
	recent [64]string
	m      map[string]string
}

func (c *strCache) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	h := (uint(len(b))*31 ^ uint(b[0])*7 ^ uint(b[len(b)-1])) % uint(len(c.recent))
	if s := c.recent[h]; s == string(b) { // no copy for the comparison
		return s
	}
	s, ok := c.m[string(b)] // nor for the lookup
	if !ok {
		s = string(b)
		if c.m == nil {
			c.m = make(map[string]string, 64)
		} else if len(c.m) >= maxCachedStrings {
			clear(c.m)
		}
		c.m[s] = s
	}
	c.recent[h] = s
	return s
}
