package docs

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// A Link is one inline link or image in a Markdown file.
type Link struct {
	Line   int
	Target string
}

var (
	// codeSpan is inline code, where brackets are not links.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// inlineLink is [text](target) or ![alt](target), with an optional title.
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// heading is an ATX heading; its closing #s are not part of the text.
	heading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	// htmlID is an explicit anchor: <a id="x"> or <a name="x">.
	htmlID = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// scheme marks an absolute URL (https:, mailto:), which is not checked.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// Links returns every inline link and image in md outside code.
func Links(md string) []Link {
	var out []Link
	for _, b := range blocks(md) {
		if b.fenced {
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(b.text, ""), -1) {
			out = append(out, Link{Line: b.line, Target: m[1]})
		}
	}
	return out
}

// Anchors returns the anchors GitHub gives md: each heading's slug (a
// repeated one numbered -1, -2, … as GitHub does) and each explicit
// <a id> or <a name>.
func Anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, b := range blocks(md) {
		if b.fenced {
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(b.text, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(b.text)
		if m == nil {
			continue
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

var (
	// mdLink is a link inside a heading, whose text alone is rendered.
	mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// htmlTag is inline HTML inside a heading, which renders no text.
	htmlTag = regexp.MustCompile(`<[^>]*>`)
)

// Slug is the anchor GitHub gives a heading: its rendered text in lower
// case, spaces turned into hyphens, and every character that is not a
// letter, a digit, a mark, a hyphen or an underscore dropped.
func Slug(text string) string {
	text = mdLink.ReplaceAllString(text, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckLinks checks every relative link of the Markdown files (paths from
// root): its file or directory exists, and its anchor, if any, is one the
// target Markdown file has (a bare #anchor: the linking file). It returns
// one line per broken link, "file:line: target: why".
func CheckLinks(root string, files []string) ([]string, error) {
	var broken []string
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchors[path] = Anchors(string(raw))
		return anchors[path], nil
	}
	for _, file := range files {
		raw, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		for _, l := range Links(string(raw)) {
			if scheme.MatchString(l.Target) || strings.HasPrefix(l.Target, "//") {
				continue
			}
			if why := checkLink(root, file, l.Target, anchorsOf); why != "" {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", file, l.Line, l.Target, why))
			}
		}
	}
	return broken, nil
}

// checkLink says why target, linked from file, does not resolve, or "".
func checkLink(root, file, target string, anchorsOf func(string) (map[string]bool, error)) string {
	path, anchor, _ := strings.Cut(target, "#")
	path, err := url.PathUnescape(path)
	if err != nil {
		return "bad escape in path"
	}
	dest := filepath.Join(root, file)
	if path != "" {
		dest = filepath.Join(root, filepath.Dir(file), filepath.FromSlash(path))
		rel, err := filepath.Rel(root, dest)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "outside the repository"
		}
		if _, err := os.Stat(dest); err != nil {
			return "no such file"
		}
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(dest, ".md") {
		return "an anchor into a file that is not Markdown"
	}
	if anchor, err = url.PathUnescape(anchor); err != nil {
		return "bad escape in anchor"
	}
	have, err := anchorsOf(dest)
	if err != nil {
		return err.Error()
	}
	if !have[anchor] {
		return "no heading or anchor #" + anchor + " in " + filepath.ToSlash(mustRel(root, dest))
	}
	return ""
}

// mustRel is dest relative to root, or dest when it has no such path.
func mustRel(root, dest string) string {
	if rel, err := filepath.Rel(root, dest); err == nil {
		return rel
	}
	return dest
}
