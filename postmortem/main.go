package postmortem

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apmwatch/apmwatch/internal/outfile"
)

// Output says where a report goes.
type Output struct {
	Format string // "text" (80 columns), "wide" (the timelines in full) or "json", on Stdout
	HTML   string // also write the HTML page to this file
	Stdout io.Writer
}

// CheckFormat validates an --output value.
func CheckFormat(f string) error {
	if f != "text" && f != "wide" && f != "json" && f != "" {
		return fmt.Errorf("bad --output %q: want text, wide or json", f)
	}
	return nil
}

// Main runs a postmortem of the recordings at paths and writes it out.
func Main(ctx context.Context, paths []string, o Options, out Output) error {
	if err := CheckFormat(out.Format); err != nil {
		return err
	}
	rep, err := Run(ctx, paths, o)
	if err != nil {
		return err
	}
	if out.HTML != "" {
		if err := writeHTMLFile(out.HTML, rep); err != nil {
			return err
		}
	}
	switch out.Format {
	case "json":
		return WriteJSON(out.Stdout, rep)
	case "wide":
		return WriteTextWide(out.Stdout, rep)
	}
	return WriteText(out.Stdout, rep)
}

// writeHTMLFile renders the page into path.tmp as it goes (a large report
// is never held whole) and renames it to path once complete, so a failed
// render leaves no half page. path must not be a symbolic link.
func writeHTMLFile(path string, rep *Report) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("writing html: %s %w", path, outfile.ErrSymlink)
	}
	tmp := path + ".tmp"
	f, err := outfile.Create(tmp, os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("writing html: %w", err)
	}
	bw := bufio.NewWriter(f)
	err = WriteHTML(bw, rep)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing html: %w", err)
	}
	return nil
}
