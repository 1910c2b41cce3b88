package postmortem

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apmwatch/apmwatch/apm"
	"github.com/apmwatch/apmwatch/internal/outfile"
)

// Output says where a report goes.
type Output struct {
	Format string // "text" (80 columns), "wide" (the timelines in full) or "json", on Stdout
	HTML   string // also write the HTML page to this file
	Stdout io.Writer
	// FailOn, when set, makes Main return a *FailError once the report is
	// written if a finding shown is of this severity or worse (--fail-on).
	FailOn *apm.Severity
}

// FailError says the report shows findings at or above --fail-on's
// severity: the report is complete, the exit status tells automation.
type FailError struct {
	N  int          // the findings shown at or above At
	At apm.Severity // --fail-on
}

func (e *FailError) Error() string {
	return fmt.Sprintf("%d finding(s) of severity %s or worse (--fail-on %s)", e.N, e.At, e.At)
}

// failOn counts the findings shown at or above at; a resolved finding
// counts too (the QP was unprotected while it lasted).
func failOn(r *Report, at apm.Severity) error {
	n := 0
	for _, f := range r.Findings {
		if f.Severity >= at {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return &FailError{N: n, At: at}
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
		err = WriteJSON(out.Stdout, rep)
	case "wide":
		err = WriteTextWide(out.Stdout, rep)
	default:
		err = WriteText(out.Stdout, rep)
	}
	if err != nil || out.FailOn == nil {
		return err
	}
	return failOn(rep, *out.FailOn)
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
