package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// TestCallErrorsChooseStatus: a handler error wrapping toolkit.ErrNotSent
// ends `error` even when the call's deadline has passed (it did not run),
// and one wrapping toolkit.ErrOutcomeUnknown ends `outcome_unknown`.
func TestCallErrorsChooseStatus(t *testing.T) {
	// The handler returns as soon as its deadline passes; a watchdog grace
	// far above scheduling delays keeps the watchdog out of the race.
	h := newHarness(t, func(c *Config) { c.WatchdogGrace = 10 * time.Second })
	h.d.cfg.Registry.Register(toolkit.Tool{Name: "waits_in_vain", Description: "Never reaches its server.", ReadOnly: true,
		Timeout: 50 * time.Millisecond, Schema: json.RawMessage(objSchema),
		Handler: func(ctx context.Context, _ *toolkit.Call) (toolkit.Result, error) {
			<-ctx.Done()
			return toolkit.Result{}, fmt.Errorf("not sent: the server is restarting (%w)", toolkit.ErrNotSent)
		}})
	h.d.cfg.Registry.Register(toolkit.Tool{Name: "server_died", Description: "Its server died mid-call.", ReadOnly: true,
		Schema: json.RawMessage(objSchema),
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{}, fmt.Errorf("the server failed during the call (%w)", toolkit.ErrOutcomeUnknown)
		}})
	res := h.dispatch(turn("s1", "r1", call("a", "waits_in_vain", `{}`), call("b", "server_died", `{}`)))
	if diff := cmp.Diff([]string{"a=error", "b=outcome_unknown"}, statuses(res)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}
