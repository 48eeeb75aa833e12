// Package taumcp is the MCP workload of `tooldispatch bench`: the calls of
// τ-bench's airline domain (Sierra's τ-bench, MIT licence; the file
// expected-calls.json of ../shared/testdata/tau-bench) and a small stdio
// MCP server that offers the domain's tools and answers every call with a
// deterministic stub built from the tool's name and its arguments.
//
// The server (Server, run over stdio by the taumcp-server command or by a
// test binary's TestMain) is a go-sdk server like any other; it keeps no
// state, so the same calls in the same order get the same answers whoever
// makes them. It is a benchmark fixture, not a tool for production.
package taumcp
