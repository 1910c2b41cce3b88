// Package natsserver is the NATS server `apmwatch fleet` embeds when no
// --nats URL is given (server.go: listen, store, TLS, monitoring,
// reload) and its users: the authorization file, the permissions of a
// host, of the fleet and of local clients, and `apmwatch fleet add-host`
// (authz.go).
//
// It runs on the fleet's machine, inside the fleet process; hosts
// connect to it over the network. In the flow host -> NATS -> judge ->
// finding line it is NATS itself.
//
// It is not a client of its own (the options to reach it in-process come
// from fleet/natsconn), and neither side: it imports neither the judge
// (fleet) nor fleet/publish, and the host side never imports it
// (internal/layering).
package natsserver
