// Package layering holds the structure rules of the module, checked by its
// tests (make lint runs them, and so does go test ./...). Data flows one way,
// probe -> event -> model -> finding -> output or action, and the imports
// follow it:
//
//   - event, the stream every source produces, imports nothing of the
//     module and nothing outside the standard library;
//   - apm, the model, imports only event of the module, and only
//     golang.org/x/sys outside the standard library: no I/O, no BPF, no
//     output;
//   - cmd/ wires the packages into commands: nothing imports it;
//   - lab/ is the lab: nothing outside it imports it;
//   - the modes (session, audit, fleet, postmortem, actuator) import
//     none of each other: what they share lives below them (the finding
//     line in findingline, output, recording, ...);
//   - a mode's packages are those under it (fleet/publish is the
//     fleet's);
//   - the fleet's roles follow its data, host -> NATS -> judge -> finding
//     line: the host side (fleet/publish) never imports the judge (fleet)
//     nor the embedded server (fleet/natsserver); the judge never imports
//     fleet/publish; the protocol (fleet/wire) imports no NATS client and
//     no other package of the fleet; the NATS client (fleet/natsconn)
//     imports neither side nor the server; the server neither side;
//   - the test kits (apm/apmtest, recording/recordingtest,
//     internal/testkit, deploy/promcheck, findingline/findinglinetest,
//     fleet/fleettest) are imported by tests and by other test kits only,
//     never by the product.
//
// The rules are read from `go list -json` with every build tag the module
// uses, so the lab's guest tests and the man page generator are checked too.
//
// A package's doc.go that names its files (actuator, apm, audit, ...) names
// every .go file the package has besides its tests, and only files it has
// (files_test.go).
package layering
