// Package cluster makes a dispatcher a member of a protoactor cluster:
// sessions are grains spread over the members by session id, any member
// takes any request, and events reach every member's sink.
//
// It is an actors.Router (see actors.NewRouted) and adds no rule of its own:
// the session actors, their protocol (protobuf messages only) and
// everything a turn does stay in package actors. It links what a cluster
// needs (protoactor's remote and cluster packages, gRPC), so an embedder
// that runs in one process does not.
//
// Join's Member also tells where a session lives (Member.Owner): the
// member the cluster's own placement (rendezvous hashing over the current
// members, as protoactor's disthash lookup places grains) puts it on, with
// the service address that member advertised (Options.ServiceURL or
// Member.Advertise), which each member answers from a small actor of its
// own ("tooldispatch-directory"). Member.Forwarded counts the requests sent
// to a grain on another member.
//
// It must not know how sessions are stored: the caller hands it a store in
// actors.Config that the members share (PostgreSQL) and that rejects a
// stale writer; it never opens one. It must not know tools, HTTP or the
// command line.
package cluster
