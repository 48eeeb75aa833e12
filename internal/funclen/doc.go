// Package funclen holds the module's check on function length: no
// function or method outside a test file, and outside generated code, is
// longer than MaxLines lines (its declaration through its closing brace).
// It has no code of its own to import; the check is its test.
package funclen

// MaxLines is the longest a function may be.
const MaxLines = 100
