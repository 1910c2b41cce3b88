package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sourceBin is where the units in deploy/ run apmwatch from (a binary
// installed by hand); the packages install it elsewhere.
const sourceBin = "/usr/local/bin/apmwatch"

// renderUnit rewrites a unit's ExecStart lines to run bin instead of
// sourceBin, and says so in a comment at the top: the packages' units name
// the packaged binary even where no drop-in applies. A unit with no such
// ExecStart is an error (the unit changed; the packages would not follow).
func renderUnit(src []byte, bin string) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	n := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "ExecStart="+sourceBin+" ") || l == "ExecStart="+sourceBin+"\n" {
			lines[i] = strings.Replace(l, sourceBin, bin, 1)
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("no ExecStart=%s", sourceBin)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# As installed by the apmwatch package: ExecStart runs %s.\n", bin)
	b.WriteString(strings.Join(lines, ""))
	return b.Bytes(), nil
}

func unitCmd(args []string) error {
	fs := flag.NewFlagSet("unit", flag.ContinueOnError)
	bin := fs.String("bin", "/usr/bin/apmwatch", "the packaged binary")
	out := fs.String("o", "", "write the units in this directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 || *out == "" {
		return fmt.Errorf("usage: gen unit [-bin PATH] -o DIR UNIT...")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, u := range fs.Args() {
		src, err := os.ReadFile(u)
		if err != nil {
			return err
		}
		b, err := renderUnit(src, *bin)
		if err != nil {
			return fmt.Errorf("%s: %w", u, err)
		}
		if err := os.WriteFile(filepath.Join(*out, filepath.Base(u)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
