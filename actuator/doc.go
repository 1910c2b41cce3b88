// Package actuator changes the APM state of a QP another process owns.
//
// A user QP can only be modified through the uverbs file that created it.
// The actuator borrows the owner's /dev/infiniband/uverbsN with pidfd_open
// and pidfd_getfd (ptrace access to the owner), and runs the legacy
// MODIFY_QP and QUERY_QP commands on the owner's QP handle through
// ioctl(RDMA_VERBS_IOCTL) with UVERBS_METHOD_INVOKE_WRITE: write() on a
// borrowed file is refused (ib_safe_file_access compares the file's creds
// with the caller's), the ioctl path has no such check.
//
// Files: abi.go (every number and byte layout, encoders), ioctl.go (the
// syscall, INFO_HANDLES, driver id probe), borrow.go (finding and borrowing
// the owner's file), process.go (the owner pinned by a pidfd), owner.go
// (who owns a QP, from rdma netlink and /proc), resolve.go (QPN -> handle),
// identity.go (a handle's reading checked against netlink's row), ops.go
// (query, load-alt, rearm, migrate: check, act, verify, log), errors.go
// (error classes), gid.go (GIDs as IPv6 addresses), flags.go (actuate's
// alternate-path flags), cli.go (qp list and show), qpdoc.go (their JSON documents), policy.go, strictjson.go and
// allow.go (the audit --enforce policy, its strict parsing and its
// allowlist), pathbits.go (path bits against the 7-bit field and the
// port's LMC), enforcer.go (acting on findings), schedule.go (grace
// periods, running actions side by side), queue.go, fairturn.go and ratelimit.go
// (the rate limit's queue, processes taking turns in it), generation.go and loss.go (which QP an action may
// touch), metrics.go (its counters for the audit daemon's metrics).
// docs/actuator.md is the user's view.
package actuator
