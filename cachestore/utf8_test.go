package cachestore

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tooldispatch/tooldispatch/messages"
)

// TestTurnUTF8ValidCoversEveryString sets each string field reachable from
// a TurnRecord, one at a time, to invalid UTF-8: the fast check must notice
// every one and toValidUTF8 must repair every one.
func TestTurnUTF8ValidCoversEveryString(t *testing.T) {
	var paths [][]protoreflect.FieldDescriptor
	var walk func(md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor)
	walk = func(md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor) {
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			p := append(slices.Clone(prefix), fd)
			switch fd.Kind() {
			case protoreflect.StringKind:
				paths = append(paths, p)
			case protoreflect.MessageKind:
				if fd.IsMap() {
					t.Fatalf("map field %s: extend turnUTF8Valid and this test", fd.FullName())
				}
				if len(p) < 5 {
					walk(fd.Message(), p)
				}
			}
		}
	}
	walk((&messages.TurnRecord{}).ProtoReflect().Descriptor(), nil)
	if len(paths) < 10 {
		t.Fatalf("found only %d string fields", len(paths))
	}
	for _, p := range paths {
		rec := &messages.TurnRecord{}
		m := rec.ProtoReflect()
		for _, fd := range p[:len(p)-1] {
			if fd.IsList() {
				l := m.Mutable(fd).List()
				e := l.NewElement()
				l.Append(e)
				m = e.Message()
			} else {
				m = m.Mutable(fd).Message()
			}
		}
		last := p[len(p)-1]
		bad := protoreflect.ValueOfString("a\xffb")
		if last.IsList() {
			m.Mutable(last).List().Append(bad)
		} else {
			m.Set(last, bad)
		}
		name := pathName(p)
		if turnUTF8Valid(rec) {
			t.Errorf("turnUTF8Valid misses %s", name)
		}
		if !toValidUTF8(rec.ProtoReflect()) || !turnUTF8Valid(rec) {
			t.Errorf("toValidUTF8 did not repair %s", name)
		}
	}
}

func pathName(p []protoreflect.FieldDescriptor) string {
	names := make([]string, len(p))
	for i, fd := range p {
		names[i] = string(fd.Name())
	}
	return strings.Join(names, ".")
}
