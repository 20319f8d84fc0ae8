package untrusted

import (
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// ParseYAML checks data (Check), parses it, and refuses aliases that would expand to more than
// MaxAliasExpansion values, or a tree over MaxDepth or MaxNodes (Check errs high, this is the
// exact count). The parser's own errors are returned as the parser gives them (yaml.Error), so
// callers keep their formatting of syntax errors.
func ParseYAML(file string, data []byte) (*ast.File, error) {
	if err := Check(file, data); err != nil {
		return nil, err
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, err
	}
	if err := CheckTree(file, f); err != nil {
		return nil, err
	}
	return f, nil
}

// CheckTree applies the limits to a parsed file: depth, values, and the values its aliases
// stand for once expanded, each anchor's size including the aliases inside it (so a chain of
// anchors, each holding ten aliases of the one before, is refused at the first alias that
// crosses the limit, whatever the chain's length).
func CheckTree(file string, f *ast.File) error {
	t := tree{file: file, anchors: map[string]int{}}
	for _, d := range f.Docs {
		if d == nil {
			continue
		}
		if _, err := t.size(d.Body, 0); err != nil {
			return err
		}
	}
	return nil
}

type tree struct {
	file     string
	anchors  map[string]int // anchor name -> values it stands for
	nodes    int
	expanded int
	deepest  int // for tests
}

func (t *tree) at(n ast.Node) (int, int) {
	if n == nil {
		return 1, 1
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line, tk.Position.Column
	}
	return 1, 1
}

func (t *tree) refuse(n ast.Node, format string, args ...any) error {
	line, col := t.at(n)
	s := scanner{file: t.file}
	return s.limit(line, col, format, args...)
}

// size counts the values under n (n included), with aliases expanded.
func (t *tree) size(n ast.Node, depth int) (int, error) {
	if n == nil {
		return 0, nil
	}
	count := func(children int) (int, error) {
		t.nodes++
		if t.nodes > MaxNodes {
			return 0, t.refuse(n, "more than %d values (scalars, mappings, lists); a file may hold at most %d", MaxNodes, MaxNodes)
		}
		return sat(1, children), nil
	}
	collection := func(kids []ast.Node) (int, error) {
		if depth+1 > MaxDepth {
			line, col := t.at(n)
			s := scanner{file: t.file}
			return 0, s.depthErr(line, col)
		}
		t.deepest = max(t.deepest, depth+1)
		total := 0
		for _, k := range kids {
			c, err := t.size(k, depth+1)
			if err != nil {
				return 0, err
			}
			total = sat(total, c)
		}
		return count(total)
	}
	switch v := n.(type) {
	case *ast.MappingNode:
		kids := make([]ast.Node, 0, 2*len(v.Values))
		for _, kv := range v.Values {
			kids = append(kids, kv.Key, kv.Value)
		}
		return collection(kids)
	case *ast.MappingValueNode:
		return collection([]ast.Node{v.Key, v.Value})
	case *ast.MappingKeyNode:
		return t.size(v.Value, depth)
	case *ast.SequenceNode:
		return collection(v.Values)
	case *ast.SequenceEntryNode:
		return t.size(v.Value, depth)
	case *ast.TagNode:
		return t.size(v.Value, depth)
	case *ast.AnchorNode:
		c, err := t.size(v.Value, depth)
		if err != nil {
			return 0, err
		}
		if v.Name != nil {
			t.anchors[v.Name.GetToken().Value] = c
		}
		return c, nil
	case *ast.AliasNode:
		name := ""
		if v.Value != nil {
			name = v.Value.GetToken().Value
		}
		c := max(t.anchors[name], 1)
		t.expanded = sat(t.expanded, c)
		if t.expanded > MaxAliasExpansion {
			return 0, t.refuse(n, "aliases expand to more than %d values (at *%s, which stands for %d); a file's aliases may expand to at most %d",
				MaxAliasExpansion, name, c, MaxAliasExpansion)
		}
		return c, nil
	case *ast.CommentGroupNode, *ast.CommentNode:
		return 0, nil
	}
	return count(0)
}

// sat adds without overflowing.
func sat(a, b int) int {
	if a > int(^uint(0)>>1)-b {
		return int(^uint(0) >> 1)
	}
	return a + b
}
