// Package toolkit is the tool model of tooldispatch: what a tool is, the
// registry that holds them, strict canonical argument parsing, the compiled
// schema cache, the views each provider gets (tools array and turn-context
// text), find_tools search and the confirm policy.
//
// It also holds the rules that read a call (NormaliseName, UnwrapRunTool,
// ResolveCall), so the dispatcher and anything that reads calls afterwards
// read them one way.
//
// An embedder's own tool is most easily a typed Go function: Typed builds
// a Tool from func(ctx, In) (Out, error), its schema generated from In.
// Whether the model sees the tool directly is the turn's tools-array policy
// (ArrayPolicy: lazy by default, all) and the tool's AlwaysInArray flag.
//
// It knows nothing of actors or of how results are stored; built-in tools live
// in the builtin sub-package.
package toolkit
