// Package layers holds the test of the module's import rules (docs/architecture.md, "Layout"):
// imports only go down.
package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const mod = "github.com/rig-dev/rig/"

// goList runs go list with args on the module's packages, and returns its fields.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list imports with")
	}
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	if !strings.Contains(string(out), mod) {
		t.Fatalf("go list %s lists no package of the module: %q", strings.Join(args, " "), out)
	}
	return strings.Fields(string(out))
}

// matches reports whether the module's package pkg (path inside the module) is rule: that
// package, or with a trailing slash anything under it.
func matches(pkg, rule string) bool {
	if under, ok := strings.CutSuffix(rule, "/"); ok {
		return pkg == under || strings.HasPrefix(pkg, rule)
	}
	return pkg == rule
}

// Each package (with everything it imports) must not reach the packages listed against it.
func TestImportsGoDown(t *testing.T) {
	for _, c := range []struct {
		pkg     string
		forbids []string
	}{
		{"./engine/...", []string{"loadgen/", "rundir", "runner/", "analysis"}},
		{"./runner", []string{"analysis", "sweep", "target/local", "target/ssh", "target/reach"}},
		{"./conformance", []string{"runner", "analysis", "sweep"}},
		// The fake cluster stands in under the runner and the suite, so it reaches neither.
		{"./target/targettest", []string{"runner/", "conformance", "playbooks/", "analysis", "sweep", "target/local", "target/ssh"}},
		{"./transport/...", []string{"analysis", "infra/"}},
		{"./agent/...", []string{"analysis", "infra/"}},
		{"./loadgen/...", []string{"analysis"}},
		// Drivers come in a registry cmd/rig hands down: what reads a playbook or a run folder
		// reaches no driver of its own (a legacy manifest is read from its declared form).
		{"./playbooks/...", []string{"engine/driver/reference"}},
		{"./runner/...", []string{"engine/driver/reference"}},
		{"./plancheck", []string{"engine/driver/reference"}},
		{"./conformance", []string{"engine/driver/reference"}},
		{"./analysis/...", []string{"engine/driver/reference"}},
		{"./sweep", []string{"engine/driver/reference"}},
		{"./history", []string{"engine/driver/reference"}},
		// rundir is imported by the run folder's writers and readers, so it reaches none of them.
		{"./rundir", []string{"actions", "agent", "agent/supervise", "agent/sample", "loadgen/", "runner/",
			"playbooks/", "target/", "transport/", "recording/", "analysis", "sweep", "history"}},
	} {
		for _, dep := range goList(t, "-deps", c.pkg) {
			pkg, ok := strings.CutPrefix(dep, mod)
			if !ok {
				continue
			}
			for _, f := range c.forbids {
				if matches(pkg, f) {
					t.Errorf("%s imports %s (docs/architecture.md: imports only go down)", c.pkg, pkg)
				}
			}
		}
	}
}

// The packages docs/architecture.md says import only a few others of the module import no more.
func TestLeavesImportOnlyTheirList(t *testing.T) {
	for _, c := range []struct {
		pkg    string
		allows []string
	}{
		{"./inventory", []string{"internal/"}},
		// rundir: the contract packages whose shapes its files embed, and internal helpers.
		{"./rundir", []string{"engine", "engine/driver", "inventory", "agent/facts", "agent/tune", "agent/disk",
			"diskmodel", "linkproxy", "internal/"}},
	} {
		for _, imp := range goList(t, "-f", `{{join .Imports " "}}`, c.pkg) {
			pkg, ok := strings.CutPrefix(imp, mod)
			if !ok {
				continue
			}
			allowed := false
			for _, a := range c.allows {
				allowed = allowed || matches(pkg, a)
			}
			if !allowed {
				t.Errorf("%s imports %s, which docs/architecture.md does not list for it", c.pkg, pkg)
			}
		}
	}
}

// Every package of the module is named in docs/architecture.md's Layout: by its path, or, inside
// the entry of a folder (a line that starts with "engine/"), by its path below that folder.
func TestLayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Layout")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## Layout"`)
	}
	_, rest, _ = strings.Cut(rest, "```\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/architecture.md's Layout has no code block")
	}
	// entries: a line that starts with a path, and the indented lines after it.
	type entry struct{ head, text string }
	var entries []entry
	for _, l := range strings.Split(block, "\n") {
		if l == "" {
			continue
		}
		if l[0] != ' ' || len(entries) == 0 {
			entries = append(entries, entry{head: strings.Fields(l)[0]})
		}
		entries[len(entries)-1].text += " " + l + " "
	}
	names := func(text, name string) bool {
		re := regexp.MustCompile("(^|[\\s(,;`])" + regexp.QuoteMeta(name) + "($|[\\s),;:`])")
		return re.MatchString(text)
	}
	for _, p := range goList(t, "./...") {
		pkg, ok := strings.CutPrefix(p, mod)
		if !ok {
			continue
		}
		named := false
		for _, e := range entries {
			below, in := strings.CutPrefix(pkg, e.head)
			named = named || names(e.text, pkg) || names(e.text, pkg+"/") || (in && strings.HasSuffix(e.head, "/") && names(e.text, below))
		}
		if !named {
			t.Errorf("docs/architecture.md's Layout does not name %s", pkg)
		}
	}
}

// initAllowed are the packages whose init() may stay, with why: they seed a counter from the
// clock, and fill no table another package reads.
var initAllowed = map[string]string{
	"loadgen": "seeds its session and stream id counters from the clock",
}

// No package fills a table from init(): a registry or table is built where it is declared (a var
// initializer) or handed down explicitly, so what a package holds is read in one place.
func TestNoInitRegistries(t *testing.T) {
	for _, line := range goList(t, "-f", `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles "|"}}`, "./...") {
		parts := strings.Split(line, "|")
		pkg, ok := strings.CutPrefix(parts[0], mod)
		if !ok || len(parts) < 3 {
			continue
		}
		for _, name := range parts[2:] {
			if name == "" { // a package of tests alone
				continue
			}
			path := filepath.Join(parts[1], name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", path, err)
			}
			for _, d := range f.Decls {
				fn, isFunc := d.(*ast.FuncDecl)
				if !isFunc || fn.Recv != nil || fn.Name.Name != "init" {
					continue
				}
				if _, allowed := initAllowed[pkg]; !allowed {
					t.Errorf("%s/%s has an init(): build its table in the variable's initializer, or hand it down", pkg, name)
				}
			}
		}
	}
}
