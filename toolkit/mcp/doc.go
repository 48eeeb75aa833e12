// Package mcp connects tooldispatch to the MCP servers named in the
// operator's configuration and exposes their tools in a toolkit.Registry.
//
// A Manager starts each server (a command spoken to over stdio, or a
// Streamable HTTP URL) through the modelcontextprotocol/go-sdk client,
// registers every tool the server lists as mcp__<server>__<tool>, follows
// the server's notifications/tools/list_changed, and restarts a server that
// dies, with exponential back-off. MCP tools always run alone (never
// concurrently) and need approval unless the operator trusts the server and
// the tool declares readOnlyHint.
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
