// Package script builds the operator's own tools: script tools (script_*),
// programs declared in TOML manifests or inline in the configuration that
// get the call's canonical arguments as JSON on stdin and answer on stdout,
// and extension tools (ext_*), HTTP endpoints that get the arguments as a
// JSON POST body and answer with the response body.
//
// Trust comes only from the operator's configuration, which lives outside
// the workspace. A manifest inside the workspace (shipped by the repository
// being worked on) may declare tools, but whatever it claims about being
// read-only or trusted is ignored: its tools always need approval.
//
// The package knows nothing of actors or storage: it only adds tools to a
// toolkit.Registry.
package script
