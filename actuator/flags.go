package actuator

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// AltFlags are the alternate-path flags of `apmwatch actuate`.
type AltFlags struct {
	Port      uint8
	DLID      uint16
	SGIDIndex uint8
	DGID      string
	PKeyIndex uint16
	Timeout   uint8
	SL        uint8
	HopLimit  uint8
	PathBits  uint8
}

// Register adds the flags.
func (f *AltFlags) Register(fl *pflag.FlagSet) {
	fl.Uint8Var(&f.Port, "alt-port", 0, "alternate path: local port")
	fl.Uint16Var(&f.DLID, "alt-dlid", 0, "alternate path: destination LID")
	fl.Uint8Var(&f.SGIDIndex, "alt-sgid-index", 0, "alternate path: source GID index (with --alt-dgid)")
	fl.StringVar(&f.DGID, "alt-dgid", "", "alternate path: destination GID (makes the path global)")
	fl.Uint16Var(&f.PKeyIndex, "alt-pkey-index", 0, "alternate path: P_Key index")
	fl.Uint8Var(&f.Timeout, "alt-timeout", 14, "alternate path: local ACK timeout (4.096 us * 2^N)")
	fl.Uint8Var(&f.SL, "alt-sl", 0, "alternate path: service level")
	fl.Uint8Var(&f.HopLimit, "alt-hop-limit", 64, "alternate path: hop limit (with --alt-dgid)")
	fl.Uint8Var(&f.PathBits, "alt-src-path-bits", 0, "alternate path: source path bits (an LMC path: the SLID is the port's LID + these)")
}

// Path returns the alternate path the flags name, or nil when no --alt-*
// flag was given. changed reports whether a flag was set.
func (f *AltFlags) Path(changed func(string) bool) (*AltPath, error) {
	any := false
	for _, n := range []string{"alt-port", "alt-dlid", "alt-sgid-index", "alt-dgid", "alt-pkey-index", "alt-timeout", "alt-sl", "alt-hop-limit", "alt-src-path-bits"} {
		any = any || changed(n)
	}
	if !any {
		return nil, nil
	}
	if !changed("alt-port") {
		return nil, errors.New("an alternate path needs --alt-port")
	}
	if !changed("alt-dlid") && f.DGID == "" {
		return nil, errors.New("an alternate path needs --alt-dlid or --alt-dgid")
	}
	if f.PathBits > maxPathBits {
		return nil, fmt.Errorf("--alt-src-path-bits must be 0-%d (a 7-bit field), not %d", maxPathBits, f.PathBits)
	}
	p := &AltPath{Port: f.Port, PKeyIndex: f.PKeyIndex, Timeout: f.Timeout,
		Dest: Dest{DLID: f.DLID, SL: f.SL, PortNum: f.Port, SrcPathBits: f.PathBits}}
	if f.DGID != "" {
		g, err := ParseGID(f.DGID)
		if err != nil {
			return nil, err
		}
		p.Dest.DGID, p.Dest.IsGlobal, p.Dest.SGIDIndex, p.Dest.HopLimit = g, true, f.SGIDIndex, f.HopLimit
	}
	return p, nil
}
