package toolkit
// View is defined in view.go.
type View struct{ Registry *Registry }
