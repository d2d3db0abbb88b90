// Package docs reads the repository's Markdown the way its tests need to
// keep it honest: the relative links and the anchors they point at
// (CheckLinks), and the Go snippets, which must compile against the real
// API (GoSnippets, Wrap).
package docs

import (
	"regexp"
	"strings"
)

// block is one line of a Markdown file outside code fences, or one fenced
// code block, with the 1-based line it starts on.
type block struct {
	line int
	// text is the line; for a code block, its content.
	text string
	// info is a code block's info string ("go", "sh"); fenced says it is one.
	info   string
	fenced bool
}

// fence opens or closes a code block: three or more backticks or tildes.
var fence = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})\\s*([^`\\s]*)")

// blocks splits md into its lines outside code fences and its fenced code
// blocks, so that links, headings and snippets are read only where
// Markdown reads them.
func blocks(md string) []block {
	var out []block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			out = append(out, block{line: i + 1, text: lines[i]})
			continue
		}
		// A fence closes on a line of the same character, at least as long.
		marker, start := m[1], i
		var body []string
		for i++; i < len(lines); i++ {
			t := strings.TrimSpace(lines[i])
			if strings.HasPrefix(t, marker[:1]) && strings.Trim(t, marker[:1]) == "" && len(t) >= len(marker) {
				break
			}
			body = append(body, lines[i])
		}
		out = append(out, block{line: start + 2, text: strings.Join(body, "\n"), info: m[2], fenced: true})
	}
	return out
}
