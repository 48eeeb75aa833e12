// Package hostform gives the one form of a URL's host that every check and
// every connection of the network tools use (http_request, fetch_page,
// download_file, search_web, MCP over HTTP, and the origins secrets are
// bound to).
//
// A host is turned into that form once, when its URL is parsed: a name goes
// through IDNA's Lookup profile (golang.org/x/net/idna, the mapping the Go
// HTTP client applies to a non-ASCII name before dialling it), loses a
// trailing dot, and must then be a valid DNS name; a name that ends in a
// number is an IPv4 address in any of the forms browsers accept
// (2130706433, 0x7f.1, 0177.0.0.1) and becomes dotted decimal; an IPv6
// address is written canonically and may carry no zone. The caller puts the
// form back into the URL, so that the host a check looks at is the host
// that is dialled, byte for byte. A host that does not survive is refused
// with an *Error saying why.
//
// The package knows nothing of tools, policies or secrets.
package hostform
