// Package mcptest is a misbehaving MCP server for the tests of tooldispatch:
// a test binary that calls Serve from its TestMain when Env is set becomes a
// stdio MCP server that breaks the protocol's expectations in the way Env
// names (endless tool pages, floods of notifications, a listing it never
// answers…), so that the tests can run the attacks against a real process.
//
// It speaks JSON-RPC on the wire by hand, not with the SDK, so that it can
// send what no well-behaved server would. It is not for production use and
// knows nothing of tooldispatch.
package mcptest
