package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// nfpmConfigs turns deploy/package/nfpm.yaml into the configs nfpm builds
// each package with. nfpm marks an rpm's %doc file by file, and never
// expands a directory or glob of type doc (and ignores the type for the
// .deb); so for the .rpm every "type: doc" entry becomes one entry per file,
// and for the .deb the entry loses its type. The .rpm's config also names the
// changelog nfpm turns into %changelog (nfpm reads that path unexpanded).
// vars expands ${NAME} in a doc entry's src.
func nfpmConfigs(src []byte, vars map[string]string, changelog string) (deb, rpm []byte, err error) {
	var debCfg, rpmCfg map[string]any
	if err := yaml.Unmarshal(src, &debCfg); err != nil {
		return nil, nil, err
	}
	if err := yaml.Unmarshal(src, &rpmCfg); err != nil {
		return nil, nil, err
	}
	contents, ok := debCfg["contents"].([]any)
	if !ok {
		return nil, nil, fmt.Errorf("no contents list")
	}
	var rpmContents []any
	for _, c := range contents {
		e, ok := c.(map[string]any)
		if !ok || e["type"] != "doc" {
			rpmContents = append(rpmContents, c)
			continue
		}
		delete(e, "type")
		if p, _ := e["packager"].(string); p == "deb" {
			continue
		}
		from, _ := e["src"].(string)
		to, _ := e["dst"].(string)
		files, err := docFiles(os.Expand(from, func(k string) string { return vars[k] }))
		if err != nil {
			return nil, nil, fmt.Errorf("doc %s: %v", from, err)
		}
		for _, f := range files {
			d := to
			if strings.HasSuffix(to, "/") {
				d = path.Join(to, filepath.Base(f))
			}
			r := map[string]any{"src": f, "dst": d, "type": "doc", "packager": "rpm"}
			if fi, ok := e["file_info"]; ok {
				r["file_info"] = fi
			}
			rpmContents = append(rpmContents, r)
		}
	}
	rpmCfg["contents"] = rpmContents
	rpmCfg["changelog"] = changelog
	if deb, err = yaml.Marshal(debCfg); err != nil {
		return nil, nil, err
	}
	rpm, err = yaml.Marshal(rpmCfg)
	return deb, rpm, err
}

// docFiles lists a doc entry's files: a directory's (src ends in /), a
// glob's, or the one file.
func docFiles(src string) ([]string, error) {
	var files []string
	switch {
	case strings.HasSuffix(src, "/"):
		ents, err := os.ReadDir(src)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.IsDir() {
				return nil, fmt.Errorf("%s: a directory in it: give it an entry of its own", filepath.Join(src, e.Name()))
			}
			files = append(files, filepath.Join(src, e.Name()))
		}
	case strings.ContainsAny(src, "*?["):
		m, err := filepath.Glob(src)
		if err != nil {
			return nil, err
		}
		files = m
	default:
		files = []string{src}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no file")
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil {
			return nil, err
		} else if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a file", f)
		}
	}
	sort.Strings(files)
	return files, nil
}

func nfpmCmd(args []string) error {
	fs := flag.NewFlagSet("nfpm", flag.ContinueOnError)
	stage := fs.String("stage", "", "the staging directory: APMWATCH_PKG_STAGE")
	changelog := fs.String("changelog", "", "the changelog nfpm reads for the rpm")
	out := fs.String("o", "", "write nfpm-deb.yaml and nfpm-rpm.yaml in this directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *stage == "" || *changelog == "" || *out == "" {
		return fmt.Errorf("usage: gen nfpm -stage DIR -changelog FILE -o DIR nfpm.yaml")
	}
	src, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	deb, rpm, err := nfpmConfigs(src, map[string]string{"APMWATCH_PKG_STAGE": *stage}, *changelog)
	if err != nil {
		return fmt.Errorf("%s: %v", fs.Arg(0), err)
	}
	if err := os.WriteFile(filepath.Join(*out, "nfpm-deb.yaml"), deb, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "nfpm-rpm.yaml"), rpm, 0o644)
}
