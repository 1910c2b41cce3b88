// Package version holds build information set by the linker.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X github.com/apmwatch/apmwatch/internal/version.Version=...".
var (
	Version = "dev"
	Commit  = ""
)

// Info is the build information of this binary.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
}

// Get returns the build information, falling back to the VCS stamp Go embeds.
func Get() Info {
	commit := Commit
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	return Info{Version: Version, Commit: commit, Go: runtime.Version()}
}

func (i Info) String() string {
	return fmt.Sprintf("apmwatch %s (commit %s, %s)", i.Version, i.Commit, i.Go)
}
