package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apmwatch/apmwatch/internal/columns"
)

const (
	routesTopo = "../../fabric/testdata/fattree/ibnetdiscover.out"
	routesLFTs = "../../fabric/testdata/fattree/dump_lfts.out"
)

// routes on the real fixtures: the table fits 80 columns, the JSON
// document carries both routes, what they share and the ends.
func TestRoutesOnTheFixtures(t *testing.T) {
	args := []string{"routes", "--topology", routesTopo, "--lfts", routesLFTs, "--from", "2", "--to", "22", "--alt", "25"}
	out, _, err := runErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if columns.Width(l) > columns.Terminal {
			t.Errorf("a line of %d columns: %q", columns.Width(l), l)
		}
	}
	for _, want := range []string{"route lid 2 -> lid 22 (path bits 0): H1 port 1 -> H7 port 1, 3 switches",
		"2    Spine1  0x0000000000200000  1   4", "link    Leaf1 port 7 -> Spine1 port 1",
		"end: destination H7 port 1, alternate's H8 port 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	out, _, err = runErr(append(args, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Route struct {
			Hops []struct {
				Name    string `json:"name"`
				OutPort int    `json:"out_port"`
			} `json:"hops"`
		} `json:"route"`
		Alt    *struct{ To int } `json:"alt"`
		Shared []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"shared"`
		Ends struct {
			Destination struct{ Same bool } `json:"destination"`
			Source      struct{ Same bool } `json:"source"`
		} `json:"ends"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(doc.Route.Hops) != 3 || doc.Route.Hops[2].Name != "Leaf4" || doc.Route.Hops[2].OutPort != 1 ||
		doc.Alt == nil || doc.Alt.To != 25 || len(doc.Shared) != 5 || doc.Shared[1].Kind != "link" ||
		!doc.Ends.Source.Same || doc.Ends.Destination.Same {
		t.Fatalf("document %+v", doc)
	}
	// Without --alt: no "alt", "shared" or "ends".
	out, _, err = runErr("routes", "--topology", routesTopo, "--lfts", routesLFTs, "--from", "2", "--to", "22", "-o", "json")
	if err != nil || strings.Contains(out, `"shared"`) || strings.Contains(out, `"ends"`) || strings.Contains(out, `"alt"`) {
		t.Fatalf("%v: %s", err, out)
	}
	// Sharing nothing: "shared" is there, empty.
	out, _, err = runErr("routes", "--topology", routesTopo, "--lfts", routesLFTs, "--from", "12", "--to", "22", "--alt", "8", "--alt-from", "18", "-o", "json")
	if err != nil || !strings.Contains(out, `"shared": []`) {
		t.Fatalf("%v: %s", err, out)
	}
}

// Bad flags exit 2, bad files and LIDs no port has exit 1, each with one
// lowercase line and nothing on stdout.
func TestRoutesErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("Switch 8 \"S-zz\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := []string{"routes", "--topology", routesTopo, "--lfts", routesLFTs}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"routes", "--from", "2", "--to", "22"}, 2, "--topology and --lfts are required"},
		{append(ok, "--to", "22"), 2, "--from is required"},
		{append(ok, "--from", "2"), 2, "--to is required"},
		{append(ok, "--from", "2", "--to", "70000"), 2, "invalid argument"},
		{append(ok, "--from", "2", "--to", "49152"), 2, "bad --to 49152"},
		{append(ok, "--from", "2", "--to", "22", "--alt-from", "3"), 2, "--alt-from needs --alt"},
		{append(ok, "--from", "2", "--to", "22", "-o", "yaml"), 2, "bad --output"},
		{append(ok, "--from", "2", "--to", "22", "extra"), 2, "takes no arguments"},
		{[]string{"routes", "--topology", filepath.Join(dir, "none"), "--lfts", routesLFTs, "--from", "2", "--to", "22"}, 1, "no such file"},
		{[]string{"routes", "--topology", garbage, "--lfts", routesLFTs, "--from", "2", "--to", "22"}, 1, "garbage: topology: line 1: switch header: bad node id"},
		{[]string{"routes", "--topology", routesTopo, "--lfts", routesTopo, "--from", "2", "--to", "22"}, 1, "lfts: no unicast switch table"},
		{append(ok, "--from", "7", "--to", "22"), 1, "source lid 7 is no port's in the topology"},
		{append(ok, "--from", "2", "--to", "22", "--alt", "40"), 1, "alternate: destination lid 40 is no port's"},
	} {
		out, _, err := runErr(c.args...)
		if err == nil || exitCode(err) != c.code || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v (exit %d), want exit %d with one line containing %q", c.args, err, exitCode(err), c.code, c.want)
		}
		if out != "" {
			t.Errorf("%v printed %q", c.args, out)
		}
	}
}
