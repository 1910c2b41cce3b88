// Command apmwatch watches InfiniBand Automatic Path Migration on a host.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "apmwatch:", err)
		os.Exit(exitCode(err))
	}
}
