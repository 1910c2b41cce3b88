// Package fabric reads what operators of an InfiniBand fabric already
// produce and walks its unicast routes: the topology ibnetdiscover prints
// (switches and channel adapters by GUID, their descriptions, the links
// port to port, each end port's LID and LMC) and the linear forwarding
// tables dump_lfts, ibroute or OpenSM's opensm-lfts.dump print (per
// switch, destination LID to out port). A route is walked hop by hop from
// a source LID (path bits included) to a destination LID, bounded, and two
// routes are compared: what they both cross, their end ports apart.
//
// It is not a subnet manager and computes no routing of its own: a route
// is what the dumped tables say, as of when they were dumped. It does not
// run the tools (it reads their output), knows nothing of QPs, and does not
// judge: which route is an APM alternate is its caller's knowledge.
//
// Every file is hostile input: lines, bytes, nodes, ports and forwarding
// entries are bounded (Limits), and a file past a bound or out of the
// format is one error naming the line.
//
// Files: doc.go, limits.go (the bounds, the bounded line reader),
// topology.go (ibnetdiscover), lft.go (forwarding tables), route.go (the
// walk), compare.go (what two routes share), report.go (the table and the
// JSON document).
package fabric
