package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/apmwatch/apmwatch/actuator"
	"github.com/apmwatch/apmwatch/audit"
	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
	"github.com/apmwatch/apmwatch/internal/outfile"
	"github.com/spf13/cobra"
)

func newActuateCmd() *cobra.Command {
	var req actuator.Request
	var alt actuator.AltFlags
	var output, logFile string
	cmd := &cobra.Command{
		Use:   "actuate query|load-alt|rearm|migrate --pid P --qpn N",
		Short: "Query or change the APM state of another process's QP (verbs)",
		Long: "Borrows the owner's /dev/infiniband/uverbsN (pidfd_getfd: needs ptrace access) and runs\n" +
			"QUERY_QP / MODIFY_QP on its QP handle. Every operation checks the QP before and after and\n" +
			"logs each step on stderr (or --log). --dry-run shows the exact command and changes nothing.",
		Example: "  apmwatch actuate query --pid 4242 --qpn 17\n" +
			"  apmwatch actuate rearm --pid 4242 --qpn 17 \\\n      --alt-port 2 --alt-dlid 0x13 --dry-run\n" +
			"  apmwatch actuate migrate --pid 4242 --qpn 17 \\\n      --log /var/log/apmwatch/actions.jsonl\n" +
			"  apmwatch actuate policy-check /etc/apmwatch/policy.json",
		Args:              exactArgs(1),
		ValidArgsFunction: completeActuateOp,
		RunE: func(cmd *cobra.Command, args []string) error {
			op, err := actuator.ParseOp(args[0])
			if err != nil {
				return usageError{err}
			}
			asJSON, err := outputJSON(cmd, output)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("pid") || !cmd.Flags().Changed("qpn") {
				return usageError{fmt.Errorf("--pid and --qpn are required")}
			}
			if err := errors.Join(event.CheckPID(int64(req.PID)), event.CheckQPN(req.QPN)); err != nil {
				return usageError{err}
			}
			req.Op = op
			if req.Alt, err = alt.Path(cmd.Flags().Changed); err != nil {
				return usageError{err}
			}
			var logw io.Writer = cmd.ErrOrStderr()
			logJSON := false
			if logFile != "" {
				f, err := outfile.Create(logFile, os.O_APPEND)
				if err != nil {
					return err
				}
				defer f.Close()
				logw, logJSON = f, true
			}
			a := actuator.New(func(e actuator.LogEntry) { actuator.WriteLog(logw, e, logJSON) })
			res, err := a.Do(cmd.Context(), req)
			if res != nil && (err == nil || res.Before != nil) {
				_ = actuator.WriteResult(cmd.OutOrStdout(), res, asJSON)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&req.PID, "pid", 0, "the process that owns the QP")
	fl.Uint32Var(&req.QPN, "qpn", 0, "the QP number")
	fl.StringVar(&req.Device, "device", "", "the RDMA device (needed when the QPN exists on several)")
	_ = cmd.RegisterFlagCompletionFunc("device", completeDevices)
	fl.BoolVar(&req.DryRun, "dry-run", false, "show the exact command, send nothing")
	fl.StringVar(&logFile, "log", "", "append the action log to this file as JSON lines (default: text on stderr)")
	addOutputFlag(cmd, &output, "")
	alt.Register(fl)
	cmd.AddCommand(&cobra.Command{
		Use:     "policy-check FILE",
		Short:   "Validate an audit enforcement policy file (no root needed)",
		Example: "  apmwatch actuate policy-check /etc/apmwatch/policy.json",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := actuator.LoadPolicy(args[0])
			if err != nil {
				return err
			}
			unchecked, err := p.CheckPorts()
			if err != nil {
				return err
			}
			if len(unchecked) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: not on this host, path bits not compared with the port's LMC: %s\n",
					escape.Text(args[0]), escape.Text(strings.Join(unchecked, ", ")))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: mode %s, grace %v, %d alternates, rate %d per %v\n",
				args[0], p.Mode, time.Duration(p.Grace), len(p.Alternates), p.RateLimit.Max, time.Duration(p.RateLimit.Per))
			return nil
		},
	})
	return cmd
}

// enforceAudit adds --policy and --enforce to `apmwatch audit` and sets the
// audit's actor to the policy enforcer. Without --policy nothing acts;
// without --enforce it monitors (the findings say what would be done): the
// flag is the one switch, "enforce" in the file alone stays monitor with a
// warning. Called from newAuditCmd.
func enforceAudit(cmd *cobra.Command, cfg *audit.Config) {
	var policy string
	var enforce bool
	cmd.Flags().StringVar(&policy, "policy", "", "act on missed-rearm findings under this policy file (see apmwatch actuate policy-check)")
	cmd.Flags().BoolVar(&enforce, "enforce", false, "with --policy: change QPs (default: monitor only, say what would be done)")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if prev != nil {
			if err := prev(c, args); err != nil {
				return err
			}
		}
		if policy == "" {
			if enforce {
				return usageError{fmt.Errorf("--enforce needs --policy")}
			}
			return nil
		}
		p, err := actuator.LoadPolicy(policy)
		if err != nil {
			return usageError{err}
		}
		if _, err := p.CheckPorts(); err != nil {
			return usageError{err}
		}
		log := slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))
		p, warning := p.Effective(enforce)
		if warning != "" {
			log.Warn(warning, "policy", policy)
		}
		a := actuator.New(func(e actuator.LogEntry) { actuator.WriteLog(c.ErrOrStderr(), e, false) })
		e := actuator.NewEnforcer(p, a)
		e.Log = log.Info
		cfg.Actor = e
		return nil
	}
}
