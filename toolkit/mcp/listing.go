package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listTools lists the server's tools on c, page by page, within ctx and the
// listing's bounds (maxListPages, maxListTools, maxListBytes). A listing
// over a bound is a violation of c (the server is then marked failed); its
// error wraps ErrOverLimit.
func (s *server) listTools(ctx context.Context, c *conn) ([]*mcp.Tool, error) {
	var (
		tools []*mcp.Tool
		size  int
	)
	// The listing's size is what the server sent meanwhile, as the meter
	// counted it; an in-process server's pages are measured as JSON.
	metered := c.stdio != nil || c.stopHTTP != nil
	before := c.meter.received.Load()
	params := &mcp.ListToolsParams{}
	for page := 1; ; page++ {
		res, err := c.session.ListTools(ctx, params)
		if err != nil {
			if over := c.overLimit(); over != nil {
				return nil, over
			}
			if stall := c.stallError(); stall != nil {
				return nil, fmt.Errorf("listing the tools: %w", stall)
			}
			if ctx.Err() != nil && s.m.ctx.Err() == nil {
				return nil, fmt.Errorf("listing the tools: no answer within %s (connect_timeout): %w", s.cfg.ConnectTimeout, err)
			}
			return nil, fmt.Errorf("listing the tools: %w", err)
		}
		if metered {
			size = int(c.meter.received.Load() - before)
		} else {
			b, err := json.Marshal(res)
			if err != nil {
				return nil, fmt.Errorf("listing the tools: page %d: %w", page, err)
			}
			size += len(b)
		}
		tools = append(tools, res.Tools...)
		var over error
		switch {
		case size > maxListBytes:
			over = overLimit("listing the tools: more than %s in %d pages", sizeText(maxListBytes), page)
		case len(tools) > maxListTools:
			over = overLimit("listing the tools: more than %d tools in %d pages", maxListTools, page)
		case res.NextCursor == "":
			return tools, nil
		case page >= maxListPages:
			over = overLimit("listing the tools: more than %d pages", maxListPages)
		}
		if over != nil {
			c.violate(over)
			return nil, over
		}
		params.Cursor = res.NextCursor
	}
}

// sync lists the server's tools again and brings the registry in line
// (apply). A listing that fails otherwise than by breaking a bound leaves
// the previous tools in place.
func (s *server) sync(c *conn) {
	ctx, cancel := context.WithTimeout(s.m.ctx, s.cfg.ConnectTimeout)
	defer cancel()
	list, err := s.listTools(ctx, c)
	if err != nil {
		// A broken bound is c's violation: serve ends the session.
		if !errors.Is(err, ErrOverLimit) && s.m.ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("listing the MCP server's tools failed; keeping the previous list")
		}
		return
	}
	s.apply(list)
	if h := s.m.hooks.synced; h != nil {
		h(s.name)
	}
}
