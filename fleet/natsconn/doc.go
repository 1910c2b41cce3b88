// Package natsconn is how either side of the fleet reaches NATS: the
// client options NATS users know from the nats CLI (NATSOptions:
// credentials, NKey, user and password file, TLS), the connection, the
// streams' limits and their creation (natsconn.go), the server's
// permission denials, told once per subject and returned as DeniedError
// (denials.go), and the reading of a stream's last record per subject
// and of whole streams (lastread.go).
//
// It runs wherever a client runs: on each host under `apmwatch audit
// --publish`, in every `apmwatch fleet` instance, under `apmwatch fleet
// status` and `postmortem --nats`. In the flow host -> NATS -> judge ->
// finding line it is both ends of the NATS arrow.
//
// It is not the server (fleet/natsserver: nats-server keeps the server
// apart from the client, so does this) and neither side: it imports
// neither fleet/publish, nor the judge (fleet), nor nats-server
// (internal/layering).
package natsconn
