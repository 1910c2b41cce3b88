// Package guest holds the tests that run inside the lab guest (root, soft-RoCE
// rxe0/rxe1 on a veth pair, the apmlab module loaded, the lab programs on
// PATH). Every other file carries the labguest build tag: `make lab-test`
// builds them with -tags labguest and runs the binary on both lab kernels.
// helpers.go has what other guest tests reuse: run a lab program, read its
// JSON lines, wait for lines, read sysfs counters.
package guest
