// Package messages holds the protobuf messages that cross the boundary of a
// tooldispatch actor system: turns to dispatch, their results, tool messages,
// events and confirmation replies, and the turn record as persisted.
//
// It knows nothing of actors, storage or tools.
package messages

//go:generate protoc --go_out=. --go_opt=paths=source_relative tooldispatch.proto
