package main

import (
	"fmt"
	"path/filepath"

	"github.com/apmwatch/apmwatch/fleet"
	"github.com/apmwatch/apmwatch/fleet/natsserver"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// addFleetServerFlags are the embedded server's (who may connect, TLS,
// monitoring) and the limits of the streams the fleet creates.
func addFleetServerFlags(fl *pflag.FlagSet, cfg *fleet.Config) {
	fl.StringVar(&cfg.Auth, "auth", "", "the embedded NATS's users and their permissions (NATS accounts/authorization; apmwatch fleet add-host writes it); needed for a --listen beyond loopback")
	fl.StringVar(&cfg.TLSCert, "tls-cert", "", "the embedded NATS serves TLS with this certificate (with --tls-key)")
	fl.StringVar(&cfg.TLSKey, "tls-key", "", "the certificate's key")
	fl.StringVar(&cfg.TLSCA, "tls-ca", "", "verify client certificates with these CAs when clients give one")
	fl.BoolVar(&cfg.TLSVerify, "tls-verify", false, "require a client certificate (with --tls-ca)")
	fl.StringVar(&cfg.Monitor, "monitor", "", "serve NATS monitoring over HTTP here (PORT or :PORT: loopback; it has no authentication)")
	fl.IntVar(&cfg.Limits.Replicas, "stream-replicas", cfg.Limits.Replicas, "replicas of the streams the fleet creates (a cluster's; the embedded server holds 1)")
	fl.Int64Var(&cfg.Limits.MaxBytes, "stream-max-bytes", cfg.Limits.MaxBytes, "bound each stream the fleet creates to this many bytes, oldest messages dropped first (-1: none)")
	fl.DurationVar(&cfg.Limits.ConnMaxAge, "stream-max-age", cfg.Limits.ConnMaxAge, "keep connection records this long in a stream the fleet creates")
	fl.DurationVar(&cfg.Limits.FindingsMaxAge, "findings-max-age", cfg.Limits.FindingsMaxAge, "keep finding lines this long in a stream the fleet creates")
	fl.Int64Var(&cfg.Limits.ConnPerSubject, "stream-max-msgs-per-subject", cfg.Limits.ConnPerSubject, "revisions kept of each end's record in a stream the fleet creates")
}

func newFleetAddHostCmd() *cobra.Command {
	var auth, seed string
	var asFleet bool
	cmd := &cobra.Command{
		Use:   "add-host NAME",
		Short: "Make NATS credentials for a host and authorize them in --auth",
		Long: "Makes an NKey for the host NAME, writes its seed to --seed (mode 0600, never over an existing file) and adds\n" +
			"its public key to the authorization file --auth (created when missing, mode 0600), allowed to publish\n" +
			"the host's own subjects only and to read its own last records. With --fleet, the user is a fleet\n" +
			"instance's, fleet status's or postmortem --nats's: it reads the streams and publishes the fleet's findings.\n" +
			"Copy the seed to the host (apmwatch audit --nats-nkey FILE --nats-inbox-prefix _INBOX_NAME) and restart\n" +
			"the fleet, which reads the file at start. See docs/fleet.md, Security.",
		Example: "  apmwatch fleet add-host node17 --auth /etc/apmwatch/fleet-auth.conf \\\n      --seed node17.nk\n" +
			"  apmwatch fleet add-host ops --fleet --auth /etc/apmwatch/fleet-auth.conf",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if auth == "" {
				return usageError{fmt.Errorf("%s needs --auth FILE, the fleet's authorization file", cmd.CommandPath())}
			}
			if seed == "" {
				seed = filepath.Base(name) + ".nk"
			}
			u, err := natsserver.AddUser(auth, seed, name, asFleet)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			verb := "added to"
			if u.Created {
				verb = "written to new"
			}
			if asFleet {
				fmt.Fprintf(w, "fleet user %s: public key %s %s %s; its seed is in %s (mode 0600)\n", u.Token, u.PublicKey, verb, auth, seed)
				fmt.Fprintf(w, "use it as: apmwatch fleet status --nats nats://FLEET:4222 --nats-nkey %s\n", seed)
			} else {
				fmt.Fprintf(w, "host %s: public key %s %s %s; its seed is in %s (mode 0600)\n", u.Token, u.PublicKey, verb, auth, seed)
				fmt.Fprintf(w, "on %s, with the seed copied there (mode 0600): apmwatch audit --publish nats://FLEET:4222 --host %s --nats-nkey FILE --nats-inbox-prefix %s\n",
					u.Token, u.Token, u.InboxPrefix)
			}
			fmt.Fprintln(w, "restart the fleet to load it: systemctl restart apmwatch-fleet")
			return nil
		},
	}
	cmd.Flags().StringVar(&auth, "auth", "", "the fleet's authorization file (apmwatch fleet --auth)")
	cmd.Flags().StringVar(&seed, "seed", "", "write the NKey seed here (default NAME.nk)")
	cmd.Flags().BoolVar(&asFleet, "fleet", false, "a user for fleet instances, fleet status and postmortem --nats rather than a host")
	return cmd
}
