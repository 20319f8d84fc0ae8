// Package mdtext is the one escaper of text that comes from a run, a manifest, an index or a
// user (engine labels and versions, hostnames, command lines, node, folder and run names) where
// rig writes it: Markdown inline text and table cells (Inline), Markdown code spans (Code), link
// targets (Path) and terminal lines and plot labels (Plain). Such text can then add no heading,
// list, table column, raw HTML, link or terminal escape sequence of its own.
package mdtext

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Plain is s as one line of inert text: every control character (newline, carriage return,
// escape, DEL, C1) and every invisible formatting character (bidirectional overrides, zero-width
// joiners) becomes its \x or \u escape, and invalid UTF-8 becomes U+FFFD. For terminal output
// and plot labels.
func Plain(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			b.WriteRune(utf8.RuneError)
		case r < 0x80 && (r < 0x20 || r == 0x7f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func clean(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && (r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// mdSpecial are the characters that start Markdown (CommonMark and GitHub's) inline syntax:
// emphasis, code, links and images, autolinks and raw HTML, entities, table cells, math,
// strikethrough. Each is written with a backslash, which CommonMark defines for every ASCII
// punctuation character.
const mdSpecial = "\\`*_[]<>&|$~"

// Inline is s as Markdown inline text, safe in a paragraph, a list item, a heading or a table
// cell: Plain, then every character of mdSpecial escaped (but an underscore inside a word), and
// a leading # + - = escaped so that text at the start of a line is not a heading or a list.
func Inline(s string) string {
	s = Plain(s)
	var b strings.Builder
	for i, r := range s {
		if strings.ContainsRune(mdSpecial, r) && !intraword(s, i) || i == 0 && strings.ContainsRune("#+-=", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// intraword says whether s[i] is an underscore between two letters or digits (sync_level):
// CommonMark never opens or closes emphasis there, so it is left as written.
func intraword(s string, i int) bool {
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	return s[i] == '_' && i > 0 && i+1 < len(s) && alnum(s[i-1]) && alnum(s[i+1])
}

// Code is s as a Markdown code span, fences included: Plain, fenced by one more backtick than
// the longest run of them in s, so nothing in it is markup. Not for table cells (GitHub splits
// cells at a | even in code); use Inline there.
func Code(s string) string {
	s = Plain(s)
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " " // CommonMark strips one space each side
	}
	return fence + s + fence
}

// Path is a slash-separated file path as a Markdown link target: every element percent-encoded,
// ':' too, so the target is always a path, never a URL of some scheme (javascript:, data:), and
// no ( ) < > or space ends it early.
func Path(p string) string {
	parts := strings.Split(p, "/")
	for i, e := range parts {
		parts[i] = strings.ReplaceAll(url.PathEscape(e), ":", "%3A")
	}
	return strings.Join(parts, "/")
}

// Block is s as a fenced Markdown code block, fences and final newline included: each line
// Plain, the fence one backtick longer than the longest run of them in s (three at least), so no
// line of s closes it.
func Block(s string) string {
	lines := strings.Split(s, "\n")
	longest := 2
	for i, l := range lines {
		lines[i] = Plain(l)
		run := 0
		for _, r := range lines[i] {
			if r == '`' {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
	}
	fence := strings.Repeat("`", longest+1)
	return fence + "\n" + strings.Join(lines, "\n") + "\n" + fence + "\n"
}

// CodeCell is Code for a table cell: GitHub splits cells at a | even inside a code span, and
// reads \| there as a |.
func CodeCell(s string) string {
	return strings.ReplaceAll(Code(s), "|", `\|`)
}
