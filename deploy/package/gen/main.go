// Command gen writes what make package needs besides the build: the
// changelogs, Debian's and the one nfpm turns into the rpm's %changelog,
// from CHANGELOG.md; NOTICES, the licence and notice files of the Go modules
// compiled into the binary; nfpm's config for each package; and the systemd
// units as packaged (ExecStart running the packaged binary).
//
//	gen changelog -version V -date RFC3339 -packager P -deb OUT -rpm OUT CHANGELOG.md
//	gen notices -o OUT BINARY
//	gen nfpm -stage DIR -changelog FILE -o DIR nfpm.yaml
//	gen unit [-bin PATH] -o DIR UNIT...
package main

import (
	"fmt"
	"os"
)

func main() {
	err := fmt.Errorf("usage: gen changelog|notices|nfpm|unit ...")
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "changelog":
			err = changelogCmd(os.Args[2:])
		case "notices":
			err = noticesCmd(os.Args[2:])
		case "nfpm":
			err = nfpmCmd(os.Args[2:])
		case "unit":
			err = unitCmd(os.Args[2:])
		default:
			err = fmt.Errorf("unknown command %q: want changelog, notices, nfpm or unit", os.Args[1])
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}
