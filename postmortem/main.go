package postmortem

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/apmwatch/apmwatch/internal/outfile"
)

// Output says where a report goes.
type Output struct {
	Format string // "text" or "json", on Stdout
	HTML   string // also write the HTML page to this file
	Stdout io.Writer
}

// CheckFormat validates an --output value.
func CheckFormat(f string) error {
	if f != "text" && f != "json" && f != "" {
		return fmt.Errorf("bad --output %q: want text or json", f)
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
		var b bytes.Buffer
		if err := WriteHTML(&b, rep); err != nil {
			return fmt.Errorf("rendering html: %w", err)
		}
		if err := outfile.WriteFile(out.HTML, b.Bytes()); err != nil {
			return fmt.Errorf("writing html: %w", err)
		}
	}
	if out.Format == "json" {
		return WriteJSON(out.Stdout, rep)
	}
	return WriteText(out.Stdout, rep)
}
