// Package mcp connects tooldispatch to the MCP servers named in the
// operator's configuration and exposes their tools in a toolkit.Registry.
//
// A Manager starts each server (a command spoken to over stdio, or a
// Streamable HTTP URL) through the modelcontextprotocol/go-sdk client,
// registers every tool the server lists as mcp__<server>__<tool>, follows
// the server's notifications/tools/list_changed, and restarts a server that
// dies or stops answering pings, with exponential back-off. MCP tools
// always run alone (never concurrently) and need approval unless the
// operator trusts the server and the tool declares readOnlyHint.
//
// Servers are untrusted: what one sends is bounded (limits.go: the pages,
// tools and bytes of a listing, each message, a flood budget, each tool's
// description and schema). A server that fails at start-up or breaks a
// bound is marked failed (StateFailed, Manager.Servers says why) while the
// others serve; one that broke a bound is not retried.
//
// A call streams the server's progress (progress.go), passes its requests
// for user input to the person behind the call (elicit.go), and runs as an
// MCP task when the tool requires it (tasks.go).
//
// A program that embeds the dispatcher may attach a go-sdk *mcp.Server it
// built itself (ServerConfig.Server): the Manager talks to it over
// in-memory transports, under the same rules as any other server.
//
//	srv := mcp.NewServer(&mcp.Implementation{Name: "inventory"}, nil)
//	mcp.AddTool(srv, &mcp.Tool{Name: "stock"}, stock)
//	m := tdmcp.NewManager(reg, []tdmcp.ServerConfig{{Name: "inventory", Server: srv}}, log)
//	err := m.Start(ctx)
//
// The package knows nothing of actors, sessions or storage: it only adds
// tools to a registry and runs their calls.
package mcp
