package einotool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/cloudwego/eino/components/tool/utils"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/einotool"
)

// TripIn is one input struct, tagged the way eino reads tags. eino infers
// its tool's schema from it, and toolkit.Typed reads the same tags, so the
// struct serves an eino tool and a tooldispatch tool alike.
type TripIn struct {
	City   string `json:"city" jsonschema:"description=the city"`
	Nights int    `json:"nights" jsonschema:"description=how many nights,minimum=1,maximum=30"`
}

func book(_ context.Context, in TripIn) (string, error) {
	return fmt.Sprintf("%d nights in %s", in.Nights, in.City), nil
}

// An eino tool an agent program already has, dispatched by tooldispatch
// next to a typed tool made from the same input struct: both are checked
// against their schema before they run, so a stay of 40 nights never
// reaches either function.
func Example() {
	ctx := context.Background()
	inferred, err := utils.InferTool("book_eino", "Book a stay (an eino tool).", book)
	if err != nil {
		panic(err)
	}
	fromEino, err := einotool.New(ctx, inferred, toolkit.Tool{AlwaysInArray: true})
	if err != nil {
		panic(err)
	}
	typed := toolkit.Typed(toolkit.Tool{Name: "book_typed", Description: "Book a stay (a typed tool).", AlwaysInArray: true}, book)

	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	reg.Register(fromEino)
	reg.Register(typed)
	store := cachestore.NewMemory()
	defer store.Close()
	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		panic(err)
	}
	defer d.Close(ctx)

	res, err := d.Dispatch(ctx, &messages.DispatchTurn{Session: "s1", Run: "r1",
		Approve: actors.ApproveAll, // booking changes things: this turn lets it run
		Message: messages.NewTurn(
			messages.NewCall("c1", "book_eino", map[string]any{"city": "Lisbon", "nights": 3}),
			messages.NewCall("c2", "book_typed", map[string]any{"city": "Porto", "nights": 2}),
			messages.NewCall("c3", "book_typed", map[string]any{"city": "Faro", "nights": 40}),
		)})
	if err != nil {
		panic(err)
	}
	for _, m := range res.GetMessages() {
		fmt.Println(m.GetToolCallId(), m.GetName(), m.GetStatus(), m.GetContent())
	}
	var a, b any
	if json.Unmarshal(fromEino.Schema, &a) != nil || json.Unmarshal(typed.Schema, &b) != nil {
		panic("a schema is not JSON")
	}
	fmt.Println("eino and Typed read the same schema from TripIn:", reflect.DeepEqual(a, b))
	// Output:
	// c1 book_eino ok 3 nights in Lisbon
	// c2 book_typed ok 2 nights in Porto
	// c3 book_typed invalid_args invalid arguments: field "nights": must be <= 30, got 40
	// eino and Typed read the same schema from TripIn: true
}
