package cachestore

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Protobuf string fields must hold valid UTF-8 and proto.Marshal refuses a
// message that breaks the rule. A tool's output can break it; rather than
// fail the commit of a whole turn, both stores replace each invalid byte
// sequence with U+FFFD.

// MarshalValid marshals m; when m holds invalid UTF-8 it marshals a copy
// with the invalid sequences replaced, and reports that it did. Every store
// of this module marshals turn records through it.
func MarshalValid(m proto.Message) (raw []byte, replaced bool, err error) {
	raw, err = proto.Marshal(m)
	if err == nil {
		return raw, false, nil
	}
	c := proto.Clone(m)
	if !toValidUTF8(c.ProtoReflect()) {
		return nil, false, err
	}
	raw, err = proto.Marshal(c)
	return raw, true, err
}

// toValidUTF8 replaces invalid UTF-8 in every string field of m, nested
// messages included, in place, and reports whether it changed anything.
func toValidUTF8(m protoreflect.Message) bool {
	changed := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				if nv, ok := validValue(fd.Kind(), l.Get(i)); ok {
					l.Set(i, nv)
					changed = true
				}
			}
		case fd.IsMap():
			mp := v.Map()
			type entry struct {
				k protoreflect.MapKey
				v protoreflect.Value
			}
			var fixes []entry
			var stale []protoreflect.MapKey
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				nv, vok := validValue(fd.MapValue().Kind(), mv)
				if !vok {
					nv = mv
				}
				nk, kok := validValue(fd.MapKey().Kind(), k.Value())
				if kok {
					stale = append(stale, k)
					fixes = append(fixes, entry{nk.MapKey(), nv})
				} else if vok {
					fixes = append(fixes, entry{k, nv})
				}
				return true
			})
			for _, k := range stale {
				mp.Clear(k)
			}
			for _, e := range fixes {
				mp.Set(e.k, e.v)
			}
			changed = changed || len(fixes) > 0
		default:
			if nv, ok := validValue(fd.Kind(), v); ok {
				m.Set(fd, nv)
				changed = true
			}
		}
		return true
	})
	return changed
}

// validValue returns the fixed value of a string, or of a message changed
// in place, and whether there was anything to fix.
func validValue(kind protoreflect.Kind, v protoreflect.Value) (protoreflect.Value, bool) {
	switch kind {
	case protoreflect.StringKind:
		if s := v.String(); !utf8.ValidString(s) {
			return protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD")), true
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if toValidUTF8(v.Message()) {
			return v, true
		}
	}
	return v, false
}

// turnUTF8Valid reports whether every string of rec is valid UTF-8, without
// the cost of reflection (a test checks that it covers every string field).
func turnUTF8Valid(rec *messages.TurnRecord) bool {
	v := utf8.ValidString
	if !v(rec.GetRun()) || !v(rec.GetTurnId()) || !v(rec.GetProvider()) || !v(rec.GetCallsHash()) {
		return false
	}
	if a := rec.GetAssistant(); a != nil {
		if !v(a.GetRole()) || !v(a.GetContent()) {
			return false
		}
		for _, c := range a.GetToolCalls() {
			f := c.GetFunction()
			if !v(c.GetId()) || !v(c.GetType()) || !v(f.GetName()) || !v(f.GetArguments()) {
				return false
			}
		}
	}
	for _, m := range rec.GetToolMessages() {
		if !v(m.GetRole()) || !v(m.GetToolCallId()) || !v(m.GetName()) || !v(m.GetStatus()) ||
			!v(m.GetContent()) || !v(m.GetInjected()) {
			return false
		}
		for _, p := range m.GetParts() {
			if !v(p.GetKind()) || !v(p.GetMimeType()) || !v(p.GetUri()) {
				return false
			}
		}
	}
	return true
}
