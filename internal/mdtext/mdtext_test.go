package mdtext

import (
	"strings"
	"testing"
)

func TestPlain(t *testing.T) {
	for in, want := range map[string]string{
		"node-0 1.2.3":          "node-0 1.2.3",
		"a\nb\r\x1b[31mc\x7f":   `a\x0ab\x0d\x1b[31mc\x7f`,
		"x\u202egnp.exe":        `x\u202egnp.exe`,
		"bad\xffutf8":           "bad\uFFFDutf8",
		"tab\there":             `tab\x09here`,
		"\u0085next-line (C1)":  `\u0085next-line (C1)`,
		"zero\u200bwidth joins": `zero\u200bwidth joins`,
	} {
		if got := Plain(in); got != want {
			t.Errorf("Plain(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInline(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3-rc1 (c6in.16xlarge)":           "v1.2.3-rc1 (c6in.16xlarge)",
		"# heading":                            `\# heading`,
		"- item":                               `\- item`,
		"a | b":                                `a \| b`,
		"[x](javascript:alert(1))":             `\[x\](javascript:alert(1))`,
		"<img src=x onerror=alert(1)>":         `\<img src=x onerror=alert(1)\>`,
		"**bold** _em_ `code` ~~s~~ $m$ &amp;": `\*\*bold\*\* \_em\_ \` + "`code\\`" + ` \~\~s\~\~ \$m\$ \&amp;`,
		"two\n# lines":                         `two\\x0a# lines`,
		`back\slash`:                           `back\\slash`,
		"engine.sync_level=2 _x_ a_":           `engine.sync_level=2 \_x\_ a\_`,
		"<javascript:alert(1)>":                `\<javascript:alert(1)\>`,
	} {
		if got := Inline(in); got != want {
			t.Errorf("Inline(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCode(t *testing.T) {
	for in, want := range map[string]string{
		"rig run x":   "`rig run x`",
		"a`b":         "``a`b``",
		"`x`":         "`` `x` ``",
		"a\n# b":      "`a\\x0a# b`",
		"a ``` b ` c": "````a ``` b ` c````",
	} {
		if got := Code(in); got != want {
			t.Errorf("Code(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPathIsNeverAURL(t *testing.T) {
	for _, in := range []string{"javascript:alert(1)/report.md", "data:text/html,x", "a b/(c)<d>/report.md", "../r/report.md"} {
		got := Path(in)
		if strings.ContainsAny(got, ": ()<>") {
			t.Errorf("Path(%q) = %q: holds a character that ends or schemes a link", in, got)
		}
	}
	if got := Path("../20250601-120000-x/report.md"); got != "../20250601-120000-x/report.md" {
		t.Errorf("an ordinary path changed: %q", got)
	}
}

func TestBlock(t *testing.T) {
	if got, want := Block("exit 1\n```\n# not a heading"), "````\nexit 1\n```\n# not a heading\n````\n"; got != want {
		t.Errorf("Block = %q, want %q", got, want)
	}
	if got, want := Block("plain"), "```\nplain\n```\n"; got != want {
		t.Errorf("Block = %q, want %q", got, want)
	}
}

func TestCodeCell(t *testing.T) {
	if got, want := CodeCell("a|b"), "`a\\|b`"; got != want {
		t.Errorf("CodeCell = %q, want %q", got, want)
	}
}
