// Command taumcp-server is the stdio MCP server of the τ-bench airline
// workload of `tooldispatch bench`: taumcp-server -calls expected-calls.json.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/cmd/tooldispatch/internal/bench/taumcp"
)

func main() {
	calls := flag.String("calls", "", "τ-bench expected-calls.json `FILE`")
	flag.Parse()
	w, err := taumcp.Load(*calls)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taumcp-server:", err)
		os.Exit(2)
	}
	if err := taumcp.Server(w, nil).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "taumcp-server:", err)
		os.Exit(1)
	}
}
