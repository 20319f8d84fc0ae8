package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// StackConfig is a Pulumi.<stack>.yaml read without the pulumi CLI: the raw values of the rig
// namespace, where each came from, and which are encrypted (their values stay unknown here).
type StackConfig struct {
	Path      string
	Stack     string
	Region    string
	Values    map[string]string // key without namespace -> raw value (arrays as JSON)
	Positions map[string]string // key without namespace (or aws:region) -> file:line:column
	Secrets   map[string]bool   // keys given as {secure: ...}
	Problems  Problems          // unknown keys and values of the wrong shape
}

// ErrStackConfig marks a stack config file that cannot be read or parsed.
var ErrStackConfig = errors.New("stack config")

// StackNameFromPath returns <stack> for a path ending in Pulumi.<stack>.yaml.
func StackNameFromPath(path string) string {
	base := filepath.Base(path)
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
	return strings.TrimPrefix(base, "Pulumi.")
}

// ReadStackConfig parses a stack config file.
func ReadStackConfig(path string) (*StackConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStackConfig, err)
	}
	return ParseStackConfig(path, data)
}

// ParseStackConfig parses the bytes of a stack config file named path.
func ParseStackConfig(path string, data []byte) (*StackConfig, error) {
	sc := &StackConfig{
		Path:      path,
		Stack:     StackNameFromPath(path),
		Values:    map[string]string{},
		Positions: map[string]string{},
		Secrets:   map[string]bool{},
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrStackConfig, path, yaml.FormatError(err, false, true))
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return sc, nil
	}
	pos := func(n ast.Node) string {
		t := n.GetToken()
		if t == nil || t.Position == nil {
			return path
		}
		return fmt.Sprintf("%s:%d:%d", path, t.Position.Line, t.Position.Column)
	}
	top, ok := mappingValues(f.Docs[0].Body)
	if !ok {
		return nil, fmt.Errorf("%w: %s: the file must be a mapping with a config: key", ErrStackConfig, pos(f.Docs[0].Body))
	}
	for _, mv := range top {
		if keyText(mv.Key) != "config" {
			continue // encryptionsalt, secretsprovider, environment, ...
		}
		entries, ok := mappingValues(mv.Value)
		if !ok {
			if _, isNull := mv.Value.(*ast.NullNode); isNull {
				continue
			}
			return nil, fmt.Errorf("%w: %s: config: must be a mapping of key: value", ErrStackConfig, pos(mv.Value))
		}
		for _, e := range entries {
			full := keyText(e.Key)
			ns, name, hasNS := strings.Cut(full, ":")
			if !hasNS {
				ns, name = Namespace, full // un-namespaced keys belong to the project
			}
			p := pos(e.Key)
			if ns != Namespace {
				if full == "aws:region" {
					v, _, err := rawValue(e.Value)
					if err != nil {
						sc.Problems = append(sc.Problems, Problem{Field: full, Value: e.Value.String(), Allowed: "a region name", Pos: pos(e.Value)})
						continue
					}
					sc.Region = v
					sc.Positions[full] = pos(e.Value)
				}
				continue // other providers' settings are Pulumi's business
			}
			k, known := KeyByName(name)
			if !known {
				sc.Problems = append(sc.Problems, Problem{Field: name, Value: e.Value.String(), Pos: p,
					Allowed: "a known key: " + strings.Join(keyNames(), ", "), Reason: "unknown config key"})
				continue
			}
			v, secret, err := rawValue(e.Value)
			if err != nil {
				sc.Problems = append(sc.Problems, Problem{Field: name, Value: e.Value.String(), Pos: pos(e.Value),
					Allowed: "a " + k.Type, Reason: err.Error()})
				continue
			}
			sc.Positions[name] = pos(e.Value)
			if secret {
				sc.Secrets[name] = true
				continue
			}
			if k.Secret {
				sc.Problems = append(sc.Problems, Problem{Field: name, Value: "(plaintext)", Pos: pos(e.Value),
					Allowed: "an encrypted value", Reason: "set it with pulumi config set --secret " + name})
				continue
			}
			sc.Values[name] = v
		}
	}
	return sc, nil
}

// Spec builds and validates the spec of the file. Problems carry the file position of the value
// they are about; problems about defaults name the file and say the value is the default.
func (sc *StackConfig) Spec() (Spec, Problems) {
	s, probs := resolve(sc.Stack, sc.Region, sc.Values, sc.Problems, sc.Positions)
	for i := range probs {
		if probs[i].Pos != "" {
			continue
		}
		if p, ok := sc.Positions[probs[i].Field]; ok {
			probs[i].Pos = p
		} else {
			probs[i].Pos = sc.Path + " (not set; default or generated)"
		}
	}
	return s, probs
}

// Resolve builds a spec from raw config values (see FromConfig) and validates it, returning the
// problems of both steps at once. A value that does not parse is reported once, as such.
func Resolve(stack, region string, raw map[string]string) (Spec, Problems) {
	return resolve(stack, region, raw, nil, nil)
}

func resolve(stack, region string, raw map[string]string, earlier Problems, pos map[string]string) (Spec, Problems) {
	s, parsed := FromConfig(stack, region, raw)
	for i := range parsed {
		parsed[i].Pos = pos[parsed[i].Field]
	}
	probs := append(append(Problems{}, earlier...), parsed...)
	unparsed := map[string]bool{}
	for _, p := range probs {
		unparsed[p.Field] = true
	}
	for _, p := range Validate(s) {
		if !unparsed[p.Field] {
			probs = append(probs, p)
		}
	}
	return s, probs
}

func keyNames() []string {
	out := make([]string, len(Keys))
	for i, k := range Keys {
		out[i] = k.Name
	}
	sort.Strings(out)
	return out
}

func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch t := n.(type) {
	case *ast.MappingNode:
		return t.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{t}, true
	}
	return nil, false
}

func keyText(k ast.MapKeyNode) string {
	if t := k.GetToken(); t != nil {
		return t.Value
	}
	return k.String()
}

// rawValue turns a YAML value into the text the Pulumi Go SDK would hand the program: scalars as
// their text, lists as JSON. A {secure: ...} mapping is an encrypted value.
func rawValue(n ast.Node) (string, bool, error) {
	var v any
	if err := yaml.NodeToValue(n, &v); err != nil {
		return "", false, err
	}
	switch t := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return t, false, nil
	case bool:
		return strconv.FormatBool(t), false, nil
	case int, int64, uint64, float64:
		return fmt.Sprint(t), false, nil
	case []any:
		b, err := json.Marshal(t)
		if err != nil {
			return "", false, err
		}
		return string(b), false, nil
	case map[string]any:
		if _, ok := t["secure"]; ok && len(t) == 1 {
			return "", true, nil
		}
		return "", false, errors.New("a mapping is not a valid value here")
	}
	return "", false, fmt.Errorf("unsupported value of type %T", v)
}
