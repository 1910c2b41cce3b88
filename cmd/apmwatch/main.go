// Command apmwatch watches InfiniBand Automatic Path Migration on a host.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/apmwatch/apmwatch/internal/escape"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		os.Exit(fail(os.Stderr, err))
	}
}

// fail prints err as one line and returns the exit code. Errors may quote
// host strings (a process name, a device, a file name): they are escaped.
func fail(w io.Writer, err error) int {
	fmt.Fprintln(w, "apmwatch:", escape.Text(err.Error()))
	return exitCode(err)
}
