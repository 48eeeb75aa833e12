package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// RequestLine shows an http_request call's arguments as a person
// approving it reads them: its method and URL, then the names of the
// headers it sets and the size of its body; "" when the arguments have no
// URL. Header values are not shown: they may carry secrets.
func RequestLine(arguments string) string {
	var a struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    *string           `json:"body"`
	}
	if json.Unmarshal([]byte(arguments), &a) != nil || a.URL == "" {
		return ""
	}
	line := cmp.Or(a.Method, "GET") + " " + a.URL
	if len(a.Headers) > 0 {
		names := slices.Sorted(maps.Keys(a.Headers))
		line += "\nheaders: " + strings.Join(names, ", ")
	}
	if a.Body != nil {
		line += fmt.Sprintf("\nbody: %d bytes", len(*a.Body))
	}
	return line
}
