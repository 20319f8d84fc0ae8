package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/inventory"
)

// StackConfig is a Pulumi.<stack>.yaml read without the pulumi CLI: the raw values of the rig
// namespace, where each came from, and which are encrypted (their values stay unknown here).
type StackConfig struct {
	Path      string
	Stack     string
	Region    string
	Profile   string            // aws:profile: the shared-config profile every AWS call of the stack uses
	Values    map[string]string // key without namespace -> raw value (arrays as JSON)
	Positions map[string]string // key without namespace (or aws:region) -> file:line:column
	Secrets   map[string]bool   // keys given as {secure: ...}
	// SecretsProvider is the file's secretsprovider: (awskms://…, passphrase, …); "" when absent.
	SecretsProvider string
	Problems        Problems // unknown keys and values of the wrong shape
}

// ErrStackConfig marks a stack config file that cannot be read or parsed.
var ErrStackConfig = errors.New("stack config")

// StackNameFromPath returns <stack> for a path ending in Pulumi.<stack>.yaml, refusing a name
// outside the name grammar (inventory.CheckStackName): it names tags, resources and the stack.
func StackNameFromPath(path string) (string, error) {
	base := filepath.Base(path)
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
	name := strings.TrimPrefix(base, "Pulumi.")
	if err := inventory.CheckStackName("the stack name in "+path, name); err != nil {
		return "", fmt.Errorf("%w: %w", ErrStackConfig, err)
	}
	return name, nil
}

// ReadStackConfig parses a stack config file.
func ReadStackConfig(path string) (*StackConfig, error) {
	if _, err := StackNameFromPath(path); err != nil {
		return nil, err // before the file is even opened
	}
	data, err := untrusted.ReadFile(path, "stack config") // a regular file of at most 1 MiB
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStackConfig, err)
	}
	return ParseStackConfig(path, data)
}

// ParseStackConfig parses the bytes of a stack config file named path.
func ParseStackConfig(path string, data []byte) (*StackConfig, error) {
	stack, err := StackNameFromPath(path)
	if err != nil {
		return nil, err
	}
	sc := &StackConfig{
		Path:      path,
		Stack:     stack,
		Values:    map[string]string{},
		Positions: map[string]string{},
		Secrets:   map[string]bool{},
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte-order mark is allowed, as Pulumi allows it
	if err := checkText(path, data); err != nil {
		return nil, err
	}
	f, err := untrusted.ParseYAML(path, data) // depth, values and aliases bounded first
	if err != nil {
		return nil, syntaxError(path, err)
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
		if keyText(mv.Key) == "secretsprovider" {
			sc.SecretsProvider, _, _ = rawValue(mv.Value)
		}
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
				if full == "aws:profile" {
					v, _, err := rawValue(e.Value)
					if err != nil || strings.TrimSpace(v) == "" {
						sc.Problems = append(sc.Problems, Problem{Field: full, Value: e.Value.String(), Allowed: "a profile name of ~/.aws/config", Pos: pos(e.Value)})
						continue
					}
					sc.Profile = strings.TrimSpace(v)
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
			if err == nil && !secret {
				err = checkType(k, e.Value)
			}
			if err != nil {
				sc.Problems = append(sc.Problems, Problem{Field: name, Value: e.Value.String(), Pos: pos(e.Value),
					Allowed: typeAllowed(k), Reason: err.Error()})
				continue
			}
			sc.Positions[name] = pos(e.Value)
			if seq, ok := e.Value.(*ast.SequenceNode); ok && len(seq.Values) == 0 && k.EmptyRefused != "" {
				sc.Problems = append(sc.Problems, Problem{Field: name, Value: "[]", Pos: pos(e.Value),
					Allowed: fmt.Sprintf("at least one item, e.g. [%q]", k.Example), Reason: k.EmptyRefused})
				continue
			}
			if seq, ok := e.Value.(*ast.SequenceNode); ok {
				// Each item of a list is a config item of its own (dataVolumes[1]): its
				// problems point at it, not at the key.
				for i, it := range seq.Values {
					sc.Positions[fmt.Sprintf("%s[%d]", name, i)] = pos(it)
				}
			}
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
	s.Profile = sc.Profile
	for i := range probs {
		if probs[i].Pos != "" {
			continue
		}
		if p := positionOf(sc.Positions, probs[i].Field); p != "" {
			probs[i].Pos = p
		} else if p := positionOf(sc.Positions, probs[i].Because); probs[i].Because != "" && p != "" {
			// The key is left at its default; the rule comes from the key that is set here.
			probs[i].Pos = p
			probs[i].Reason = strings.TrimPrefix(probs[i].Reason+"; ", "; ") + fmt.Sprintf("%s is not set: the rule follows %s here", QualifiedKey(probs[i].Field), QualifiedKey(probs[i].Because))
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
		parsed[i].Pos = positionOf(pos, parsed[i].Field)
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

// positionOf is where field stands in the file, or its nearest enclosing item's or key's place
// (dataVolumes[1].size: the item dataVolumes[1]); "" when none came from a file.
func positionOf(pos map[string]string, field string) string {
	for f := field; f != ""; {
		if p, ok := pos[f]; ok {
			return p
		}
		i := strings.LastIndexAny(f, ".[")
		if i <= 0 {
			break
		}
		f = f[:i]
	}
	return ""
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

// checkText refuses what no YAML parser takes as text (invalid UTF-8, NUL and other control
// characters), naming the first offending byte's line and column, before the parser sees it.
func checkText(path string, data []byte) error {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return fmt.Errorf("%w: %s:%d:%d: byte 0x%02x is not UTF-8 text: a stack config is a YAML text file "+
				"(was a binary file saved over it?)", ErrStackConfig, path, line, col, data[i])
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f:
			return fmt.Errorf("%w: %s:%d:%d: control character %U is not allowed in YAML text", ErrStackConfig, path, line, col, r)
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return nil
}

// syntaxError turns the parser's error into one line that starts with file:line:column.
func syntaxError(path string, err error) error {
	if errors.Is(err, untrusted.ErrLimit) || errors.Is(err, untrusted.ErrTooLarge) {
		return fmt.Errorf("%w: %w", ErrStackConfig, err) // already file:line:column: ...
	}
	var ye yaml.Error
	if errors.As(err, &ye) {
		if t := ye.GetToken(); t != nil && t.Position != nil {
			msg := dupKeyRE.ReplaceAllString(ye.GetMessage(), "already defined at line $1, column $2")
			return fmt.Errorf("%w: %s:%d:%d: %s", ErrStackConfig, path, t.Position.Line, t.Position.Column, msg)
		}
	}
	return fmt.Errorf("%w: %s: %s", ErrStackConfig, path, yaml.FormatError(err, false, true))
}

var dupKeyRE = regexp.MustCompile(`already defined at \[(\d+):(\d+)\]`)

// checkType applies the type Pulumi.yaml declares for a key the way the Pulumi engine does before
// it runs the program (workspace.ValidateConfigValue on the value as the stack file holds it): a
// string key takes any scalar, an integer key a scalar that strconv.Atoi reads, a boolean key
// true or false, and an array<string> key only a YAML list of strings. A JSON list written as a
// string, which is what `pulumi config set operatorCidrs '["..."]'` stores, is not a list.
func checkType(k Key, n ast.Node) error {
	var v any
	if err := yaml.NodeToValue(n, &v); err != nil {
		return err
	}
	if k.Type == TypeArray {
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("the Pulumi engine refuses this: %s must be of type array<string>; a JSON list in a string is a string. "+
				"Set each item with pulumi config set --path '%s[0]' %q (then [1], ...), or write a YAML list", k.Name, k.Name, k.Example)
		}
		for i, it := range items {
			if _, ok := it.(string); !ok {
				return fmt.Errorf("item %d is %v, not a string: quote it (the Pulumi engine wants array<string>)", i, it)
			}
		}
		return nil
	}
	switch v.(type) {
	case []any, map[string]any:
		return fmt.Errorf("the Pulumi engine refuses this: %s must be of type %s, not a list or mapping", k.Name, k.Type)
	}
	text, _, err := rawValue(n)
	if err != nil {
		return err
	}
	switch k.Type {
	case TypeInteger:
		if _, err := strconv.Atoi(text); err != nil {
			return fmt.Errorf("the Pulumi engine refuses this: %s must be of type integer", k.Name)
		}
	case TypeBoolean:
		if text != "true" && text != "false" {
			return fmt.Errorf("the Pulumi engine refuses this: %s must be of type boolean (true or false)", k.Name)
		}
	}
	return nil
}

// ValueTypeError applies checkType to one YAML value, as it would stand in a stack config.
func ValueTypeError(k Key, value string) error {
	f, err := parser.ParseBytes([]byte("v: "+value+"\n"), 0)
	if err != nil {
		return err
	}
	mv, ok := mappingValues(f.Docs[0].Body)
	if !ok || len(mv) != 1 {
		return fmt.Errorf("not one value: %q", value)
	}
	return checkType(k, mv[0].Value)
}

func typeAllowed(k Key) string {
	switch k.Type {
	case TypeArray:
		return fmt.Sprintf("a YAML list of strings, e.g. [%q]", k.Example)
	case TypeInteger:
		return "an integer"
	case TypeBoolean:
		return "true or false"
	}
	return "a " + k.Type
}
