package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// The sections a command's man page adds to what its cobra command gives
// (NAME, SYNOPSIS, DESCRIPTION from Long, OPTIONS, EXAMPLES from Example):
// FILES, SIGNALS and EXIT STATUS, where they apply. gen-docs (gendocs.go,
// built with -tags gendocs) writes the pages; manpages_test.go checks them
// against what the code does.

// manSection is one added section: its title and its body in markdown.
type manSection struct{ Title, Body string }

// manFiles are the files each command reads or writes, by command path.
var manFiles = map[string][]string{
	"apmwatch": {
		"`/etc/default/apmwatch`: the flags of `apmwatch audit` under the packaged systemd unit (`APMWATCH_AUDIT_ARGS`)",
		"`/etc/default/apmwatch-fleet`: the flags of `apmwatch fleet` under its unit (`APMWATCH_FLEET_ARGS`)",
		"`/var/log/apmwatch/findings.jsonl`: the audit's finding log",
		"`/var/lib/apmwatch/`: the audit's flight recorder (`flight-*`), incident bundles (`incidents/`) and publish queue (`publish-queue/`)",
		"`/var/lib/apmwatch/btf/$(uname -r)/`: external BTF for RDMA modules that carry none",
	},
	"apmwatch trace": {
		"`/var/lib/apmwatch/btf/$(uname -r)/MODULE.btf`: external BTF, the default of `--btf` when the directory exists",
		"`/sys/kernel/btf/`: the kernel's and the modules' BTF; `/proc/kallsyms`: where the planner looks for each hook",
		"`/sys/class/infiniband/`: the RDMA devices (named in the events)",
		"`--record FILE`: every event and reading, before the filters (apmwatch-postmortem(1) replays it)",
	},
	"apmwatch record": {
		"`-w FILE`: the recording; with `--rotate-size`, `FILE.000000`, `FILE.000001`, ... (the newest `--rotate-keep`)",
		"`/var/lib/apmwatch/btf/$(uname -r)/MODULE.btf`: external BTF, the default of `--btf` when the directory exists",
		"`/sys/kernel/btf/`, `/proc/kallsyms`: what the probe planner reads",
	},
	"apmwatch probes": {
		"`/sys/kernel/btf/`: the kernel's and the modules' BTF (fentry needs a module's)",
		"`/proc/kallsyms`: where a hook without BTF is looked for (kprobe)",
		"`/var/lib/apmwatch/btf/$(uname -r)/MODULE.btf`: external BTF, the default of `--btf` when the directory exists",
	},
	"apmwatch postmortem": {
		"`FILE...`: recordings of `apmwatch record` or `trace --record`, rotated segments included",
		"`/var/lib/apmwatch/flight-*`: the audit's flight recorder, plain recordings (the last minutes)",
		"`/var/lib/apmwatch/incidents/NAME/events.rec`: the recording of an incident bundle",
		"`--html FILE`: written through `FILE.tmp`, created 0640, never through a symbolic link",
	},
	"apmwatch audit": {
		"`/etc/default/apmwatch`: the daemon's flags under the packaged unit (`APMWATCH_AUDIT_ARGS`); restart the unit after editing it",
		"`/var/log/apmwatch/findings.jsonl`: the finding log (`--findings`), one JSON line a finding or resolution; SIGHUP reopens it",
		"`/var/lib/apmwatch/`: the recorder directory (`--recorder-dir`): the flight recorder `flight-*`, incident bundles in `incidents/` (a directory without `.tmp` is complete), the publish queue in `publish-queue/`",
		"`/etc/apmwatch/policy.json`: the enforcement policy the drop-in `enforce.conf` gives `--policy`",
		"`/usr/share/apmwatch/systemd/apmwatch-audit.service.d/`: the opt-in drop-ins `enforce.conf`, `publish.conf`, `metrics.conf`",
		"`/var/lib/apmwatch/btf/$(uname -r)/MODULE.btf`: external BTF, the default of `--btf` when the directory exists",
	},
	"apmwatch fleet": {
		"`/etc/default/apmwatch-fleet`: the flags under the packaged unit (`APMWATCH_FLEET_ARGS`)",
		"`/var/lib/apmwatch-fleet/nats`, `/var/log/apmwatch-fleet/findings.jsonl`: the packaged unit's `--store` and `--findings`",
		"`/var/lib/apmwatch/fleet` (root), `~/.local/state/apmwatch/fleet`, else `$TMPDIR/apmwatch-fleet`: the embedded NATS's store without `--store`",
	},
	"apmwatch qp list": {
		"`/dev/infiniband/uverbsN`: an owner's uverbs file, borrowed (`pidfd_getfd`) to find its QP handles; `/proc/PID/fd`: where it is looked for",
	},
	"apmwatch qp show": {
		"`/dev/infiniband/uverbsN`: the owner's uverbs file, borrowed (`pidfd_getfd`) for QUERY_QP; `/proc/PID/fd`, `/proc/PID/stat`",
	},
	"apmwatch actuate": {
		"`/dev/infiniband/uverbsN`: the owner's uverbs file, borrowed (`pidfd_getfd`); `/proc/PID/fd`, `/proc/PID/stat` (its start time pins the owner)",
		"`--log FILE`: the action log, JSON lines appended",
	},
	"apmwatch actuate policy-check": {
		"`/etc/apmwatch/policy.json`: where the drop-in `enforce.conf` has the audit read its policy",
	},
	"apmwatch hca-check": {
		"`/sys/class/infiniband/DEV/ports/N/`: the ports' link layer, state and LID",
		"`/dev/infiniband/uverbsN`: the device's uverbs file, opened for the check's own pair",
	},
	"apmwatch btf gen": {
		"`/var/lib/apmwatch/btf/$(uname -r)/MODULE.btf`: what it writes (`--dir`), where trace, record, audit and probes look",
		"`/sys/kernel/btf/`, `/sys/module/`: which modules have BTF, which are loaded",
	},
	"apmwatch completion": {
		"`/usr/share/bash-completion/completions/apmwatch`, `/usr/share/zsh/vendor-completions/_apmwatch`, `/usr/share/fish/vendor_completions.d/apmwatch.fish`: the scripts the packages install",
	},
}

// manSignals are the signals a command handles; the others have the
// default actions.
var manSignals = map[string][]string{
	"apmwatch trace": {
		"**SIGINT**, **SIGTERM**: stop: the probes are detached, the events still in the ring buffer are shown, then the summary; exit status 0 (so does the end of `--duration`)",
	},
	"apmwatch record": {
		"**SIGINT**, **SIGTERM**: stop: the probes are detached, the events still in the ring buffer are written, then the counters and the end record; exit status 0 (so does the end of `--duration`)",
	},
	"apmwatch audit": {
		"**SIGTERM**, **SIGINT**: stop: detach the probes, judge the events already delivered, write the bundles being gathered, close the flight recorder, flush the finding log (and give the publish queue 5 s to drain); exit status 0",
		"**SIGHUP**: reopen the finding log (`--findings`), after logrotate moved it (`systemctl reload apmwatch-audit`)",
	},
	"apmwatch fleet": {
		"**SIGTERM**, **SIGINT**: stop consuming and exit, status 0; the state lives in the streams, so a restarted instance judges nothing twice",
		"**SIGHUP**: reopen the finding log (`--findings`), after logrotate moved it; the embedded NATS reads its `--auth` file again (a host added with `apmwatch fleet add-host`); a file that does not load leaves the users as they were (`systemctl reload apmwatch-fleet`)",
	},
	"apmwatch hca-check": {
		"**SIGINT**, **SIGTERM**: stop: the QPs, CQ and PD the check made are destroyed, the report of the points done so far is printed; exit status 1",
	},
}

// manExit are the failures a command reports with exit status 1, beyond
// the usual, and its own statuses.
var manExit = map[string]string{
	"apmwatch trace":  "It is also 1 when a hook that carries an APM signal is in the kernel but cannot attach (the line names it): a trace blind to that signal is an error.",
	"apmwatch record": "It is also 1 when a hook that carries an APM signal is in the kernel but cannot attach (the line names it): a recording blind to that signal is an error.",
	"apmwatch audit":  "A probe that cannot attach does not stop the daemon: it runs on (`apmwatch_probes_up` 0) and attaches again every 30 s.",
	"apmwatch postmortem": "1 for a file that is missing, not a recording, empty or a directory; damage inside a recording is a warning (`warning: FILE: offset N: ...`), not an error.\n\n" +
		"**3**: with `--fail-on SEVERITY`, the report is written and a finding shown is of that severity or worse (the line counts them).",
	"apmwatch fleet status": "**3**: with `--fail-on SEVERITY`, the status is written and a connection shown (one-sided and unprotected: error; half-armed: warning) or a silent host (error) is of that severity or worse (the line counts them).",
	"apmwatch hca-check":    "1 for a device that is missing or refused (not InfiniBand, a port not ACTIVE or without a LID, a driver that needs its userspace provider), a verb that fails or a pair that does not arm, and an interrupt; the report of the points done so far is printed first.",
	"apmwatch actuate":      "1 when the operation fails or its check does: the line starts with the error's class (`no permission:`, `qp gone:`, `wrong state:`, ...; docs/actuator.md).",
	"apmwatch btf gen":      "1 when the BTF of a module could not be written; its line says exactly what is missing.",
}

// manSections returns the sections c's page adds.
func manSections(c *cobra.Command) []manSection {
	path := c.CommandPath()
	var out []manSection
	if files := manFiles[path]; len(files) > 0 {
		out = append(out, manSection{"FILES", manList(files)})
	}
	if sigs := manSignals[path]; len(sigs) > 0 {
		out = append(out, manSection{"SIGNALS", manList(sigs)})
	}
	exit := fmt.Sprintf("**0**: success.\n\n**%d**: a failure, said in one line on standard error (`apmwatch: ...`).\n\n"+
		"**%d**: a usage error: a wrong flag, flag value or argument, said in one line on standard error.", exitFailure, exitUsage)
	if more := manExit[path]; more != "" {
		exit += "\n\n" + more
	}
	out = append(out, manSection{"EXIT STATUS", exit})
	return out
}

func manList(items []string) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it + "\n\n")
	}
	return b.String()
}
