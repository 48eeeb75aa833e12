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
// It must not know how sessions are stored: the caller hands it a store in
// actors.Config that the members share (PostgreSQL) and that rejects a
// stale writer; it never opens one. It must not know tools, HTTP or the
// command line.
package cluster
