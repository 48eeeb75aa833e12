package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	readability "codeberg.org/readeck/go-readability/v2"
	"codeberg.org/readeck/go-readability/v2/render"
	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Limits of page extraction. What is read of a page is capped by the
// policy's MaxBytes (max_bytes, 5 MiB by default); everything below is
// linear in that, and the work stops when its context ends.
const (
	// maxPassage is the longest passage a page is split into (characters);
	// longer paragraphs are cut at sentence or line ends.
	maxPassage = 800
	// maxHeading is the longest line taken for a heading and joined to the
	// paragraph after it.
	maxHeading = 80
	// maxLinks is how many links of a page are kept.
	maxLinks = 100
	// maxLinkText is the longest link text kept (characters).
	maxLinkText = 100
	// maxReadabilityElements: readability, the one step that cannot be
	// interrupted, runs only on documents of at most this many elements
	// (about a second of CPU here); a larger document gives the text of
	// its whole body.
	maxReadabilityElements = 50_000
	// readChunk is the most the HTML parser reads between two looks at
	// the context.
	readChunk = 32 << 10
	// checkEvery is how many bytes of text are split into passages
	// between two looks at the context.
	checkEvery = 64 << 10
	// excerptInput caps the bytes of an error page read for its excerpt.
	excerptInput = 64 << 10
)

// link is one link of a page.
type link struct {
	Text string `json:"text,omitempty"`
	URL  string `json:"url"`
}

// extracted is the readable content of a response, redacted.
type extracted struct {
	Title string
	// Text is the readable text, to be split into passages
	// (splitPassages).
	Text string
	// Headings: the text was rendered from HTML, so a short line is a
	// heading of the paragraph after it.
	Headings  bool
	Links     []link
	MoreLinks int // links beyond maxLinks
}

// mediaType returns the lower-case media type of a Content-Type, sniffing
// body when the header is missing.
func mediaType(contentType string, body []byte) string {
	if contentType == "" {
		contentType = http.DetectContentType(body)
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(contentType), ";")
	}
	return strings.TrimSpace(mt)
}

func isHTML(mt string) bool { return mt == "text/html" || mt == "application/xhtml+xml" }

// isText reports whether a media type is text a model can read.
func isText(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-javascript",
		"application/ecmascript", "application/x-ndjson", "application/yaml", "application/x-yaml",
		"application/toml", "application/x-sh", "application/sql", "application/graphql", "application/csv":
		return true
	}
	return false
}

// decodeText converts a text body to UTF-8 using the charset of its
// Content-Type or of its meta tags.
func decodeText(body []byte, contentType string) []byte {
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		return body
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return body
	}
	return out
}

// extract returns the readable content of a response body, redacted by r
// (more: the body is the start of a longer one that was not read): for
// HTML, the main text found by readability, the title and the links; for
// other text, the text itself. Other media types are refused. It returns
// ctx.Err() when ctx ends first.
func extract(ctx context.Context, body []byte, contentType string, base *url.URL, r Redactor, more bool) (extracted, error) {
	mt := mediaType(contentType, body)
	switch {
	case isHTML(mt):
		return extractHTML(ctx, body, contentType, base, r, more)
	case isText(mt):
		if err := ctx.Err(); err != nil {
			return extracted{}, err
		}
		return extracted{Text: redactText(r, string(decodeText(body, contentType)), more)}, nil
	}
	return extracted{}, fmt.Errorf("the response is %s, not a text page; save it with download_file instead", mt)
}

func extractHTML(ctx context.Context, body []byte, contentType string, base *url.URL, r Redactor, more bool) (extracted, error) {
	var in io.Reader = bytes.NewReader(body)
	if cr, err := charset.NewReader(in, contentType); err == nil {
		in = cr
	}
	root, err := html.Parse(&ctxReader{ctx: ctx, r: in})
	if err != nil {
		if ctx.Err() != nil {
			return extracted{}, ctx.Err()
		}
		return extracted{}, fmt.Errorf("the page is not readable HTML: %v", err)
	}
	doc := goquery.NewDocumentFromNode(root)
	ex := extracted{Headings: true}
	ex.Title = redact(r, collapse(doc.Find("title").First().Text()))
	ex.Links, ex.MoreLinks = pageLinks(doc, base, r)
	if err := ctx.Err(); err != nil {
		return extracted{}, err
	}

	var text string
	if elementsUpTo(root, maxReadabilityElements+1) <= maxReadabilityElements {
		article, err := readability.FromDocument(root, base)
		if err == nil && article.Node != nil {
			text = render.InnerText(article.Node)
			if ex.Title == "" {
				ex.Title = redact(r, collapse(article.Title()))
			}
		}
		if err := ctx.Err(); err != nil {
			return extracted{}, err
		}
	}
	if strings.TrimSpace(text) == "" {
		// Readability found no article, or the document is too large for
		// it: fall back to the whole body.
		doc.Find("script, style, noscript, template, svg, head").Remove()
		text = render.InnerText(root)
	}
	ex.Text = redactText(r, text, more)
	return ex, nil
}

// ctxReader reads from r in pieces of at most readChunk bytes and fails
// with ctx's error once ctx has ended, so that a parser reading it stops.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p[:min(len(p), readChunk)])
}

// elementsUpTo counts the elements of the tree under n, stopping at limit.
func elementsUpTo(n *html.Node, limit int) int {
	count := 0
	stack := []*html.Node{n}
	for len(stack) > 0 && count < limit {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.Type == html.ElementNode {
			count++
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			stack = append(stack, c)
		}
	}
	return count
}

// pageLinks returns the page's http(s) links, absolute, without fragments,
// each once, in document order; at most maxLinks, and how many more. Link
// texts are redacted by r before they are cut.
func pageLinks(doc *goquery.Document, base *url.URL, r Redactor) ([]link, int) {
	var links []link
	index := map[string]int{}
	more := 0
	doc.Find("a[href]").Each(func(_ int, s *goquery.Selection) {
		href, _ := s.Attr("href")
		u, err := base.Parse(strings.TrimSpace(href))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return
		}
		u.Fragment, u.RawFragment = "", ""
		abs := u.String()
		text := collapse(s.Text())
		if text == "" {
			text = collapse(s.AttrOr("aria-label", s.AttrOr("title", "")))
		}
		text = clipRunes(redact(r, text), maxLinkText)
		if i, ok := index[abs]; ok {
			if links[i].Text == "" {
				links[i].Text = text
			}
			return
		}
		if len(links) >= maxLinks {
			more++
			return
		}
		index[abs] = len(links)
		links = append(links, link{Text: text, URL: abs})
	})
	return links, more
}

// splitPassages splits text into paragraphs of at most maxPassage
// characters, without blank lines or trailing spaces. With headings (text
// rendered from HTML), a heading-like short line is joined to the
// paragraph after it. The text is redacted already: no cut lands inside a
// redaction marker. The work is linear in the text and returns ctx.Err()
// when ctx ends first.
func splitPassages(ctx context.Context, text string, headings bool) ([]string, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var out []string
	pending := ""
	since := 0
	var block []string
	afterBlank := false // a blank line came before this block
	flush := func() error {
		if len(block) == 0 {
			return nil
		}
		b := strings.Join(block, "\n")
		block = block[:0]
		if pending != "" {
			b = pending + "\n" + b
			pending = ""
		}
		if headings && isHeading(b) {
			pending = b
			return nil
		}
		parts, err := chunk(ctx, b, maxPassage)
		out = append(out, parts...)
		return err
	}
	for i, line := range lines(text) {
		if since += len(line) + 1; since >= checkEvery {
			since = 0
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		// Indentation stays: it matters in code.
		l := strings.TrimRight(line, " \t\f\v")
		if l == "" {
			// A blank line ends a paragraph.
			if err := flush(); err != nil {
				return nil, err
			}
			afterBlank = afterBlank || i > 0
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue // other white space: dropped, the paragraph goes on
		}
		if len(block) == 0 && afterBlank {
			// A paragraph after a blank line starts at its first word.
			l = strings.TrimLeft(l, " \t\f\r")
		}
		block = append(block, l)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if pending != "" {
		out = append(out, pending)
	}
	return out, nil
}

// lines calls yield with each line of text, without its line break.
func lines(text string) func(yield func(int, string) bool) {
	return func(yield func(int, string) bool) {
		for i := 0; text != ""; i++ {
			line, rest, found := strings.Cut(text, "\n")
			if !yield(i, line) {
				return
			}
			text = rest
			if !found {
				return
			}
		}
	}
}

// isHeading: one short line that does not end a sentence.
func isHeading(s string) bool {
	if len(s) > 4*maxHeading || runeLen(s) > maxHeading || strings.Contains(s, "\n") {
		return false
	}
	return !strings.ContainsAny(s[len(s)-1:], ".!?:;,")
}

// chunk cuts s into pieces of at most max characters, at line or sentence
// ends where it can, never inside a redaction marker; linear in s.
func chunk(ctx context.Context, s string, max int) ([]string, error) {
	if len(s) <= max || runeLen(s) <= max {
		return []string{s}, nil
	}
	var out []string
	var cur strings.Builder
	curRunes := 0
	flush := func() {
		if t := strings.TrimSpace(cur.String()); t != "" {
			out = append(out, t)
		}
		cur.Reset()
		curRunes = 0
	}
	since := 0
	for u := range sentences(s) {
		if since += len(u); since >= checkEvery {
			since = 0
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		n := runeLen(u)
		if curRunes+n > max {
			flush()
		}
		for n > max {
			cut := toolkit.SafeCut(u, runeOffset(u, max))
			if cut == 0 {
				cut = runeOffset(u, max) // a marker longer than a passage
			}
			if t := strings.TrimSpace(u[:cut]); t != "" {
				out = append(out, t)
			}
			n -= runeLen(u[:cut])
			u = u[cut:]
		}
		cur.WriteString(u)
		curRunes += n
	}
	flush()
	return out, nil
}

// sentences calls yield with the pieces of s that end at a line break, or
// at a sentence end ('.', '!' or '?', maybe a closing quote or bracket,
// and white space, which the piece keeps); the last piece ends with s.
func sentences(s string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		last := 0
		for i := 0; i < len(s); {
			end := -1
			switch s[i] {
			case '\n':
				end = i + 1
			case '.', '!', '?':
				j := i + 1
				if j < len(s) && strings.IndexByte(`"')]`, s[j]) >= 0 {
					j++
				}
				k := j
				for k < len(s) && isSpaceByte(s[k]) {
					k++
				}
				if k > j {
					end = k
				}
			}
			if end < 0 {
				i++
				continue
			}
			if !yield(s[last:end]) {
				return
			}
			last, i = end, end
		}
		if last < len(s) {
			yield(s[last:])
		}
	}
}

// isSpaceByte is regexp's \s: tab, line feed, form feed, carriage return,
// space.
func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// collapse trims s and turns every run of white space into one space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// clipRunes cuts s to n characters, marking the cut with "…"; s is
// redacted already and the cut never lands inside a redaction marker.
func clipRunes(s string, n int) string {
	if len(s) <= n || runeLen(s) <= n {
		return s
	}
	return s[:toolkit.SafeCut(s, runeOffset(s, n-1))] + "…"
}

// runeOffset returns the byte offset of the character after the first n
// characters of s (len(s) when s is shorter).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
