package driver

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/internal/units"
)

// Kind is what a setting's value is; it decides how a value is read, written, rendered into a
// template and compared with what the engine reports.
type Kind string

// Kinds of settings.
const (
	Integer  Kind = "integer"  // a whole number: 2, 10K
	Bytes    Kind = "bytes"    // a size: 16MiB, 4096
	Duration Kind = "duration" // a Go duration: 200ms, 1.5s
	Boolean  Kind = "boolean"  // true or false
	Text     Kind = "text"     // any text
	OneOf    Kind = "one-of"   // one of the setting's Values
)

// Kinds lists every kind, for help texts.
var Kinds = []Kind{Integer, Bytes, Duration, Boolean, Text, OneOf}

// Render is how a duration reaches the engine: as Go writes it, or as a bare integer count of a
// unit, for properties that take only a number (Aeron's timeouts are nanoseconds).
type Render string

// Renderings of a duration.
const (
	RenderGo      Render = "go"
	RenderNanos   Render = "nanos"
	RenderMicros  Render = "micros"
	RenderMillis  Render = "millis"
	RenderSeconds Render = "seconds"
)

// Renders lists every rendering.
var Renders = []Render{RenderGo, RenderNanos, RenderMicros, RenderMillis, RenderSeconds}

var renderUnit = map[Render]time.Duration{RenderNanos: time.Nanosecond, RenderMicros: time.Microsecond,
	RenderMillis: time.Millisecond, RenderSeconds: time.Second}

var unitName = map[Render]string{RenderNanos: "nanoseconds", RenderMicros: "microseconds",
	RenderMillis: "milliseconds", RenderSeconds: "seconds"}

// Setting is one engine setting, by the name the engine knows it under.
type Setting struct {
	Name    string   `json:"name"`
	Kind    Kind     `json:"kind"`
	Default string   `json:"default,omitempty"` // asked for when the playbook says nothing; empty: the engine's own default, not asked
	Render  Render   `json:"render,omitempty"`  // durations only; empty is go
	Values  []string `json:"values,omitempty"`  // one-of only
	Min     string   `json:"min,omitempty"`     // integer, bytes, duration: the least value accepted
	Max     string   `json:"max,omitempty"`
	Help    string   `json:"help,omitempty"` // what is valid, for errors
}

// Table is a driver's settings, in the order plans and reports show them.
type Table []Setting

// Lookup finds a setting by name.
func (t Table) Lookup(name string) (Setting, bool) {
	for _, s := range t {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// Names lists the settings' names in table order.
func (t Table) Names() []string {
	out := make([]string, len(t))
	for i, s := range t {
		out[i] = s.Name
	}
	return out
}

// Check reports what is wrong with a declared setting (its kind, rendering, values, default).
func (s Setting) Check() error {
	switch {
	case strings.TrimSpace(s.Name) == "":
		return errors.New("a setting needs a name")
	case !slices.Contains(Kinds, s.Kind):
		return fmt.Errorf("kind %q is not a kind; want one of %s", s.Kind, joinKinds())
	case s.Render != "" && s.Kind != Duration:
		return fmt.Errorf("render is for durations only; %s is %s", s.Name, s.Kind)
	case s.Render != "" && !slices.Contains(Renders, s.Render):
		return fmt.Errorf("render %q is not a rendering; want one of go, nanos, micros, millis, seconds", s.Render)
	case s.Kind == OneOf && len(s.Values) == 0:
		return errors.New("kind one-of needs values: [a, b, ...]")
	case s.Kind != OneOf && len(s.Values) > 0:
		return fmt.Errorf("values are for kind one-of; %s is %s", s.Name, s.Kind)
	}
	for _, b := range []struct{ what, v string }{{"min", s.Min}, {"max", s.Max}} {
		if b.v == "" {
			continue
		}
		if s.Kind != Integer && s.Kind != Bytes && s.Kind != Duration {
			return fmt.Errorf("%s is for integer, bytes and duration settings; %s is %s", b.what, s.Name, s.Kind)
		}
		if _, err := s.number(b.v); err != nil {
			return fmt.Errorf("%s %q: %w", b.what, b.v, err)
		}
	}
	if s.Default != "" {
		if _, err := s.Canon(s.Default); err != nil {
			return fmt.Errorf("default: %w", err)
		}
	}
	return nil
}

func joinKinds() string {
	var out []string
	for _, k := range Kinds {
		out = append(out, string(k))
	}
	return strings.Join(out, ", ")
}

// number reads an integer, bytes or duration value as an integer (a duration in nanoseconds).
func (s Setting) number(v string) (int64, error) {
	switch s.Kind {
	case Integer:
		return units.ParseInt(v)
	case Bytes:
		return units.ParseSize(v)
	case Duration:
		d, err := units.ParseDuration(v)
		return int64(d), err
	}
	return 0, fmt.Errorf("%s is not a number kind", s.Kind)
}

// Canon reads a value as a playbook writes it and returns its one canonical text: an integer or
// a size in decimal (bytes), a duration as Go prints it, a boolean as true or false. Two values
// are the same setting exactly when their canonical texts are equal.
func (s Setting) Canon(v string) (string, error) {
	v = strings.TrimSpace(v)
	bad := func(format string, args ...any) (string, error) {
		msg := fmt.Sprintf(format, args...)
		if s.Help != "" {
			msg += "; want " + s.Help
		}
		return "", errors.New(msg)
	}
	switch s.Kind {
	case Integer, Bytes, Duration:
		n, err := s.number(v)
		if err != nil {
			return bad("%v", err)
		}
		if s.Min != "" {
			if lo, _ := s.number(s.Min); n < lo {
				return bad("%s is out of range (at least %s)", v, s.Min)
			}
		}
		if s.Max != "" {
			if hi, _ := s.number(s.Max); n > hi {
				return bad("%s is out of range (at most %s)", v, s.Max)
			}
		}
		if s.Kind == Duration {
			// A value the rendering cannot carry whole would reach the engine truncated.
			if unit, ok := renderUnit[s.Render]; ok && n%int64(unit) != 0 {
				return bad("%s is not a whole number of %s, and this setting is passed as an integer count of them (render: %s)",
					v, unitName[s.Render], s.Render)
			}
			return time.Duration(n).String(), nil
		}
		return strconv.FormatInt(n, 10), nil
	case Boolean:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return bad("%q is not true or false", v)
		}
		return strconv.FormatBool(b), nil
	case OneOf:
		if !slices.Contains(s.Values, v) {
			return bad("%q is not one of %s", v, strings.Join(s.Values, ", "))
		}
		return v, nil
	}
	return v, nil
}

// Show writes a canonical value for people: sizes in binary units, durations shortened.
func (s Setting) Show(canon string) string {
	switch s.Kind {
	case Bytes:
		if n, err := strconv.ParseInt(canon, 10, 64); err == nil {
			return units.FormatSize(n)
		}
	case Duration:
		if d, err := time.ParseDuration(canon); err == nil {
			return units.FormatDuration(d)
		}
	}
	return canon
}

// RenderValue is a canonical value as templates see it: a duration in the setting's rendering,
// everything else as its canonical text.
func (s Setting) RenderValue(canon string) string {
	if s.Kind != Duration {
		return canon
	}
	unit, ok := renderUnit[s.Render]
	if !ok {
		return canon
	}
	d, err := time.ParseDuration(canon)
	if err != nil {
		return canon
	}
	return strconv.FormatInt(int64(d/unit), 10)
}

// Reported reads the value an engine reports in effect (a JSON string, number or boolean from
// GET /status config) as a canonical value. A duration reported as a bare number is counted in
// the setting's rendering (nanoseconds when it renders as Go text).
func (s Setting) Reported(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", errors.New("not reported")
	case bool:
		if s.Kind == Boolean {
			return strconv.FormatBool(x), nil
		}
		return "", fmt.Errorf("reported %v, a boolean, for a setting of kind %s", x, s.Kind)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<62 {
			return "", fmt.Errorf("reported %v, not a whole number", x)
		}
		n := int64(x)
		if s.Kind == Duration {
			unit, ok := renderUnit[s.Render]
			if !ok {
				unit = time.Nanosecond
			}
			return time.Duration(n * int64(unit)).String(), nil
		}
		return s.canonReported(strconv.FormatInt(n, 10))
	case string:
		if s.Kind == Duration {
			if unit, ok := renderUnit[s.Render]; ok {
				if n, err := strconv.ParseInt(x, 10, 64); err == nil {
					return time.Duration(n * int64(unit)).String(), nil
				}
			}
		}
		return s.canonReported(x)
	}
	return "", fmt.Errorf("reported %v (%T), want a string, number or boolean", v, v)
}

// canonReported is Canon without the range: an engine may report a value the playbook could not
// ask for, and it must show as itself in the mismatch.
func (s Setting) canonReported(v string) (string, error) {
	s.Min, s.Max, s.Help = "", "", ""
	return s.Canon(v)
}
