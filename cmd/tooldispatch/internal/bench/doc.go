// Package bench runs the workloads of `tooldispatch bench`: each workload
// against tooldispatch with Badger on disk (a), tooldispatch with the
// in-memory store (b), a bare dispatcher without actors doing the same
// validation and commit (c), and cloudwego/eino's ToolsNode (d), measured in
// a module of its own and run with `go run`. It reports medians over
// repeated rounds, the ratio of each to (a), the targets with their
// measured figures and the machine it ran on.
//
// It must not change what it measures: it drives the dispatcher through
// its public API (actors, cachestore, toolkit) and knows nothing of the
// command line beyond the options it is given.
package bench
