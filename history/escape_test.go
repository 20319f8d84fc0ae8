package history

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hostile is what a run folder, its manifest or a user can put in text the history writes.
const hostile = "v2\n# Heading <img src=x onerror=alert(1)> [click](javascript:alert(1)) | cell `tick` *em*"

// The benchmark log and the trend write every run-supplied text escaped: an engine label
// (--engine-version), a command line, a folder's name and a title add no heading, raw HTML,
// link or table cell of their own, and a link to a run folder is always a path.
func TestLogEscapesRunText(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	writeRun(t, filepath.Join(root, "javascript:alert(1)"), "20261201-100000-snapshots", func(m map[string]any) {
		m["engine_build"].(map[string]any)["version"] = hostile
		m["command"] = []any{"rig", "run", "x.yaml", "--engine-version", hostile + "``"}
	}, nil)
	x := openTemp(t)
	if _, err := Import(ctx, x, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	md, err := x.Log(ctx, LogOptions{LinkFrom: root, Title: "T\n# injected"})
	if err != nil {
		t.Fatal(err)
	}
	// The command line is one code span, fenced longer than any backtick run inside it.
	var rest []string
	for _, l := range strings.Split(md, "\n") {
		cmd, ok := strings.CutPrefix(l, "- **Command:** ")
		if !ok {
			rest = append(rest, l)
			continue
		}
		fence := cmd[:strings.IndexFunc(cmd, func(r rune) bool { return r != '`' })]
		inner := strings.TrimSuffix(strings.TrimPrefix(cmd, fence), fence)
		if len(fence) < 3 || !strings.HasSuffix(cmd, fence) || strings.Contains(inner, fence) || strings.Contains(inner, "\n") {
			t.Errorf("the command is not one code span: %s", l)
		}
	}
	checkInert(t, "log", strings.Join(rest, "\n"))
	if strings.Count(md, "\n# ") != 0 || !strings.HasPrefix(md, "# T") {
		t.Errorf("a heading was added:\n%s", md)
	}
	tr, err := x.Trend(ctx, TrendOptions{Figure: "snapshot.take"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tr.Markdown(&b, TrendOptions{})
	checkInert(t, "trend", b.String())
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "| 1 |") && len(cellBar.FindAllString(l, -1)) != 8 {
			t.Errorf("the version's row has extra cells: %s", l)
		}
	}
}

// cellBar is a | that separates table cells (not one escaped as \|).
var cellBar = regexp.MustCompile(`(^|[^\\])\|`)

// checkInert fails when md holds markup that only run text could have put there.
func checkInert(t *testing.T, what, md string) {
	t.Helper()
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(^|\n)#+ Heading`),         // a heading of its own
		regexp.MustCompile(`(^|[^\\])<img`),            // raw HTML
		regexp.MustCompile(`(^|[^\\])\]\(javascript:`), // a javascript: link
		regexp.MustCompile(`(^|[^\\])\[click(\\)?\]`),  // link text that is still a link
	} {
		if bad.MatchString(md) {
			t.Errorf("%s: %s matches %s:\n%s", what, bad.FindString(md), bad, md)
		}
	}
}
