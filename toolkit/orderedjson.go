package toolkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// An ordered JSON object, for rewriting schemas without reordering their
// properties: the order of a schema's properties is the order in which a
// provider's model writes the arguments (OpenAI's strict mode keeps it;
// Gemini takes it as propertyOrdering), and a tool's author may have
// chosen it.

// jsonObject is a JSON object that keeps the order of its keys.
type jsonObject struct {
	keys []string
	vals map[string]any
}

func newJSONObject() *jsonObject { return &jsonObject{vals: map[string]any{}} }

func (o *jsonObject) get(k string) (any, bool) { v, ok := o.vals[k]; return v, ok }

func (o *jsonObject) has(k string) bool { _, ok := o.vals[k]; return ok }

// set sets k to v, keeping k's place when it is already there.
func (o *jsonObject) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *jsonObject) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, kk := range o.keys {
		if kk == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// keep removes every key for which ok is false, in one pass (deleting
// them one by one costs the square of the keys).
func (o *jsonObject) keep(ok func(string) bool) {
	kept := make([]string, 0, len(o.keys))
	for _, k := range o.keys {
		if ok(k) {
			kept = append(kept, k)
		} else {
			delete(o.vals, k)
		}
	}
	o.keys = kept
}

// MarshalJSON writes the object with its keys in order.
func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := marshalOrdered(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalOrdered encodes a value of decodeOrdered's kinds without
// escaping <, > and &.
func marshalOrdered(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// decodeOrdered decodes one JSON value: objects as *jsonObject, arrays as
// []any, numbers as json.Number.
func decodeOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := newJSONObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return tok, nil
}

// cloneOrdered copies a decoded value deeply.
func cloneOrdered(v any) any {
	switch t := v.(type) {
	case *jsonObject:
		o := newJSONObject()
		for _, k := range t.keys {
			o.set(k, cloneOrdered(t.vals[k]))
		}
		return o
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = cloneOrdered(x)
		}
		return out
	}
	return v
}
