package untrusted

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/parser"
)

// scanOf runs the byte scan alone and returns what it counted.
func scanOf(data []byte) (deepest, nodes int, err error) {
	s := scanner{file: "x", data: data, line: 1, col: 1, plainOwner: noPlain, blockOwner: noPlain}
	err = s.run()
	return s.deepest, s.nodes, err
}

// treeOf parses with the real parser and returns the tree's depth and values.
func treeOf(data []byte) (deepest, nodes int, ok bool) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return 0, 0, false
	}
	t := tree{file: "x", anchors: map[string]int{}}
	for _, d := range f.Docs {
		if d != nil {
			if _, err := t.size(d.Body, 0); err != nil {
				return 0, 0, false
			}
		}
	}
	return t.deepest, t.nodes, true
}

// The scan must not count far fewer levels or values than the parser builds: an input it
// under-counts could hide nesting from it. Where the parser is laxer than YAML (it nests a
// "- " inside [ ], or a value under a tag on a less indented line) the scan may count half
// the levels, which still bounds the parser's work (at most twice the limit) before the exact
// tree check. Random inputs from YAML's punctuation find where the two disagree; every input
// the parser accepts is compared.
func TestScanNeverUndercountsDepth(t *testing.T) {
	pieces := []string{"[", "]", "{", "}", ",", ":", ": ", "- ", "? ", "a", "b c", "\"", "'", "#", " #x",
		"\n", "\n  ", "\n    ", "\n ", "|", ">", "&x ", "*x", "!t ", "---\n", "\\", "''", "\t", "\n- ", "k: ", "  "}
	r := rand.New(rand.NewPCG(1, 2))
	checked, strict := 0, 0
	for i := 0; i < 120000; i++ {
		var b strings.Builder
		for n := 1 + r.IntN(14); n > 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		data := []byte(b.String())
		td, tn, ok := treeOf(data)
		if !ok {
			continue
		}
		checked++
		sd, sn, err := scanOf(data)
		if err != nil {
			t.Fatalf("%q: scan refused: %v", data, err)
		}
		if sd < td {
			strict++
			if strict < 6 {
				t.Logf("strict: %q %d < %d", data, sd, td)
			}
		}
		if 2*sd < td {
			t.Errorf("%q: scan counted depth %d, parser built %d", data, sd, td)
		}
		if 3*sn+3 < tn {
			t.Errorf("%q: scan counted %d values, parser built %d", data, sn, tn)
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d inputs the parser accepted, compared; %d counted fewer levels than the parser built", checked, strict)
}
