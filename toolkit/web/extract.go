package web

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	readability "codeberg.org/readeck/go-readability/v2"
	"codeberg.org/readeck/go-readability/v2/render"
	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
)

// Limits of page extraction.
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
)

// link is one link of a page.
type link struct {
	Text string `json:"text,omitempty"`
	URL  string `json:"url"`
}

// extracted is the readable content of a response.
type extracted struct {
	Title     string
	Passages  []string
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

// extract returns the readable content of a response body: for HTML, the
// main text found by readability, the title and the links; for other text,
// the text itself. Other media types are refused.
func extract(body []byte, contentType string, base *url.URL) (extracted, error) {
	mt := mediaType(contentType, body)
	switch {
	case isHTML(mt):
		return extractHTML(body, contentType, base)
	case isText(mt):
		return extracted{Passages: splitPassages(string(decodeText(body, contentType)), false)}, nil
	}
	return extracted{}, fmt.Errorf("the response is %s, not a text page; save it with download_file instead", mt)
}

func extractHTML(body []byte, contentType string, base *url.URL) (extracted, error) {
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		r = bytes.NewReader(body)
	}
	root, err := html.Parse(r)
	if err != nil {
		return extracted{}, fmt.Errorf("the page is not readable HTML: %v", err)
	}
	doc := goquery.NewDocumentFromNode(root)
	var ex extracted
	ex.Title = collapse(doc.Find("title").First().Text())
	ex.Links, ex.MoreLinks = pageLinks(doc, base)

	var text string
	article, err := readability.FromDocument(root, base)
	if err == nil && article.Node != nil {
		text = render.InnerText(article.Node)
		if ex.Title == "" {
			ex.Title = collapse(article.Title())
		}
	}
	if strings.TrimSpace(text) == "" {
		// Readability found no article: fall back to the whole body.
		doc.Find("script, style, noscript, template, svg, head").Remove()
		text = render.InnerText(root)
	}
	ex.Passages = splitPassages(text, true)
	return ex, nil
}

// pageLinks returns the page's http(s) links, absolute, without fragments,
// each once, in document order; at most maxLinks, and how many more.
func pageLinks(doc *goquery.Document, base *url.URL) ([]link, int) {
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
		text = clipRunes(text, maxLinkText)
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

// blankLines separates paragraphs.
var blankLines = regexp.MustCompile(`\n[ \t\f\v]*\n\s*`)

// splitPassages splits text into paragraphs of at most maxPassage
// characters, without blank lines or trailing spaces. With headings (text
// rendered from HTML), a heading-like short line is joined to the
// paragraph after it.
func splitPassages(text string, headings bool) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var out []string
	pending := ""
	for _, block := range blankLines.Split(text, -1) {
		lines := strings.Split(block, "\n")
		kept := lines[:0]
		for _, l := range lines {
			// Indentation stays: it matters in code.
			if l = strings.TrimRight(l, " \t\f\v"); strings.TrimSpace(l) != "" {
				kept = append(kept, l)
			}
		}
		if len(kept) == 0 {
			continue
		}
		b := strings.Join(kept, "\n")
		if pending != "" {
			b = pending + "\n" + b
			pending = ""
		}
		if headings && isHeading(b) {
			pending = b
			continue
		}
		out = append(out, chunk(b, maxPassage)...)
	}
	if pending != "" {
		out = append(out, pending)
	}
	return out
}

// isHeading: one short line that does not end a sentence.
func isHeading(s string) bool {
	if runeLen(s) > maxHeading || strings.Contains(s, "\n") {
		return false
	}
	return !strings.ContainsAny(s[len(s)-1:], ".!?:;,")
}

// sentenceEnd finds the ends of sentences.
var sentenceEnd = regexp.MustCompile(`[.!?]["')\]]?\s+|\n`)

// chunk cuts s into pieces of at most max characters, at line or sentence
// ends where it can.
func chunk(s string, max int) []string {
	if runeLen(s) <= max {
		return []string{s}
	}
	var units []string
	last := 0
	for _, m := range sentenceEnd.FindAllStringIndex(s, -1) {
		units = append(units, s[last:m[1]])
		last = m[1]
	}
	units = append(units, s[last:])
	var out []string
	var cur strings.Builder
	flush := func() {
		if t := strings.TrimSpace(cur.String()); t != "" {
			out = append(out, t)
		}
		cur.Reset()
	}
	for _, u := range units {
		if runeLen(cur.String())+runeLen(u) > max {
			flush()
		}
		for runeLen(u) > max {
			r := []rune(u)
			out = append(out, strings.TrimSpace(string(r[:max])))
			u = string(r[max:])
		}
		cur.WriteString(u)
	}
	flush()
	return out
}

// collapse trims s and turns every run of white space into one space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// clipRunes cuts s to n characters, marking the cut with "…".
func clipRunes(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
