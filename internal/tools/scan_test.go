package tools

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// declared are the exec sites whose program the scan cannot read from the code (not a string
// literal), by package folder and the expression naming the program, with what they run:
// names in Table or NotFromApt, or "self" (rig's own binary or the test's), "playbook" (the
// engine a playbook names) or "caller" (whatever its caller passes, itself scanned). A site
// that is neither a literal nor here fails the test, as does an entry here that matches none.
var declared = map[string][]string{
	"cmd/rig rigBin":                      {"self"},
	"cmd/rig self":                        {"self"},
	"cmd/rig exe":                         {"self"},
	"cmd/rig bin":                         {"self"}, // a copy of the test binary, run as nobody
	"cmd/rig args[0]":                     {"self"}, // the test binary wrapping rig to measure its memory
	"examples/aeron-cluster bin":          {"self"},
	"examples/aeron-cluster args[0]":      {"java", "runuser"}, // the foreign Aeron client, as nobody where root
	"examples/aeron-cluster rigBinary(t)": {"self"},
	"runner/launch args":                  {"playbook"}, // engine.burst_client: the engine's own command
	"runner captureArgv":                  {"playbook"}, // engine.book_capture: the engine's own command
	"target/local c.bin":                  {"self"},
	"runner r.cl.Binary(n)":               {"self"},
	"recording/cost e.Binary":             {"self"},     // rig bench recording: the reference engine in rig's own binary
	"gatewaybench n.binary":               {"playbook"}, // rig bench gateway: the Aeron example's start-node.sh --gateway-bench client (agent/supervise starts the node)
	"agent exe":                           {"self"},     // rig agent hog: a cpu_hog action's spinner
	"agent/runq child":                    {"self"},     // a copy of the test binary, run as nobody
	"infra/stack bin":                     {"self"},     // rig-stack, built from ./infra/stackctl
	"infra/stack pulumi":                  {"pulumi"},
	"infra/realpulumi path":               {"pulumi"}, // RIG_PULUMI or PATH: the optional real-Pulumi check
	"infra/ready args":                    {"sh"},     // sh -c: boot-finished, then each package's command
	"infra/awsemu bin":                    {"moto_server"},
	"agent/supervise s.Binary":            {"playbook"},
	"agent/supervise e.spec.Binary":       {"playbook"},
	"transport/local args[0]":             {"caller"},
	"cmd/rig args[1:]":                    {"caller"}, // rig ssh NODE COMMAND...
	"agent/tune bin":                      {"ethtool"},
	"agent/sample bin":                    {"ethtool"},
	"agent/disk fio":                      {"fio"},
	`agent/disk "mkfs." + fs`:             {"mkfs.ext4", "mkfs.xfs"},
	"internal/sshdtest s.sshd":            {"sshd"},
}

// madeUp are names tests run because nothing has them.
var madeUp = []string{"no-such-command-rig"}

// TestInstallLineCoversEveryTool reads every Go file of the repository for the programs it
// runs (exec.Command, exec.CommandContext, exec.LookPath, a transport.Cmd's Args, and
// Require and Lookup here) and checks that each is in Table (or NotFromApt), that every
// package Table names but Debian's Essential ones is in README.md's install line and in
// .ci/run's, and that neither names a package nothing runs.
func TestInstallLineCoversEveryTool(t *testing.T) {
	root := repoRoot(t)
	found, undeclared := scan(t, root)
	for _, u := range undeclared {
		t.Errorf("%s runs a program the scan cannot read (not a string literal): add %q to declared in internal/tools/scan_test.go with what it runs", u.pos, u.key)
	}
	used := map[string]bool{}
	for name, at := range found {
		used[name] = true
		if _, ok := Table[name]; ok {
			continue
		}
		if _, ok := NotFromApt[name]; ok || slices.Contains(madeUp, name) {
			continue
		}
		t.Errorf("%s runs %q, which is not in tools.Table: add it with the Debian package that installs it (and that package to README.md's install line and .ci/run)", at, name)
	}
	for name, tool := range Table {
		if !used[name] && tool.By == "" {
			t.Errorf("tools.Table lists %q (package %s), which no Go code runs: remove it, or say in By what runs it", name, tool.Package)
		}
	}
	for name := range NotFromApt {
		if !used[name] {
			t.Errorf("tools.NotFromApt lists %q, which no Go code runs", name)
		}
	}

	want := Packages()
	readme := readmeInstall(t, root)
	ci := ciNeed(t, root)
	for _, c := range []struct {
		file string
		got  []string
	}{{"README.md line 2 (apt-get install)", readme}, {".ci/run (need+=)", ci}} {
		for _, p := range want {
			if !slices.Contains(c.got, p) {
				t.Errorf("%s does not install %s, which tools.Table says provides %s", c.file, p, provides(p))
			}
		}
		for _, p := range c.got {
			if !slices.Contains(want, p) {
				t.Errorf("%s installs %s, which provides nothing tools.Table lists: remove it, or add what needs it", c.file, p)
			}
		}
	}
}

// provides names the programs of Table a package installs.
func provides(pkg string) string {
	var names []string
	for name, tool := range Table {
		if tool.Package == pkg {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Debian marks Essential the packages Essential says are; the install line leaves them out.
func TestEssentialPackages(t *testing.T) {
	dpkg := Require(t, "dpkg-query")
	for _, p := range Essential {
		out, err := exec.Command(dpkg, "-W", "-f", "${Essential}", p).Output()
		if err != nil {
			t.Errorf("dpkg-query %s: %v", p, err)
			continue
		}
		if strings.TrimSpace(string(out)) != "yes" {
			t.Errorf("package %s is not Essential here (%q): name it in README.md's install line and .ci/run, and take it out of tools.Essential", p, out)
		}
	}
}

// Require finds a program that is installed, and skips (or under CI=true fails) naming the
// package of one that is not; a name missing from Table is a mistake in the test, not a skip.
func TestRequire(t *testing.T) {
	if p := Require(t, "sh"); !filepath.IsAbs(p) {
		t.Fatalf("Require(sh) = %q; want an absolute path", p)
	}
	saved := Table
	t.Cleanup(func() { Table = saved })
	Table = map[string]Tool{"rig-no-such-tool": {Package: "rig-no-such-package"}}
	_, err := Lookup("rig-no-such-tool")
	if err == nil || !strings.Contains(err.Error(), "apt-get install rig-no-such-package") {
		t.Fatalf("Lookup of a missing tool: %v; want it to name its package", err)
	}
	if _, err := Lookup("rig-unlisted"); err == nil || !strings.Contains(err.Error(), "not in tools.Table") {
		t.Fatalf("Lookup of an unlisted tool: %v", err)
	}
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		rec := &recorder{TB: t}
		done := make(chan struct{})
		go func() { // Skip and Fatal end the goroutine that calls them
			defer close(done)
			Require(rec, "rig-no-such-tool")
		}()
		<-done
		switch {
		case ci == "true" && (!rec.failed || !strings.Contains(rec.msg, "rig-no-such-package")):
			t.Errorf("CI=true: failed %v with %q; want a failure naming the package", rec.failed, rec.msg)
		case ci == "" && (!rec.skipped || !strings.Contains(rec.msg, "rig-no-such-package")):
			t.Errorf("CI unset: skipped %v with %q; want a skip naming the package", rec.skipped, rec.msg)
		}
	}
}

// recorder catches a Skip or a Fatal without ending the test that runs it.
type recorder struct {
	testing.TB
	msg             string
	skipped, failed bool
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// readmeInstall is the packages of the apt-get install in README.md's second line (the test
// command).
func readmeInstall(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 3 {
		t.Fatal("README.md has no test command on line 2")
	}
	m := regexp.MustCompile(`apt-get install -y ([^&]+)&&`).FindStringSubmatch(lines[2])
	if m == nil {
		t.Fatalf("README.md line 2 has no `apt-get install -y PACKAGES &&`: %s", lines[2])
	}
	return strings.Fields(m[1])
}

// ciNeed is the packages .ci/run installs when missing (need+=(PACKAGE)).
func ciNeed(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`need\+=\(([^)]+)\)`).FindAllStringSubmatch(string(b), -1) {
		for _, p := range strings.Fields(m[1]) {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal(".ci/run has no need+=(PACKAGE)")
	}
	// has PROG || need+=(PACKAGE): the program looked for is one the package installs.
	for _, m := range regexp.MustCompile(`has (\S+) \|\| need\+=\((\S+)\)`).FindAllStringSubmatch(string(b), -1) {
		if tool, ok := Table[m[1]]; !ok || tool.Package != m[2] {
			t.Errorf(".ci/run installs %s when %s is missing, but tools.Table says %s comes from %q", m[2], m[1], m[1], tool.Package)
		}
	}
	return out
}

type site struct{ key, pos string }

// scan is every program name the Go code under root runs by a literal (with where, for the
// message), and the sites that run something else, less those declared.
func scan(t *testing.T, root string) (map[string]string, []site) {
	t.Helper()
	found := map[string]string{}
	seen := map[string]bool{}
	var undeclared []site
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "vendor" || n == "node_modules") {
				return filepath.SkipDir
			}
			// This package: its tests run made-up names on purpose.
			if rel, _ := filepath.Rel(root, p); filepath.ToSlash(rel) == "internal/tools" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		fileSites(f, func(fn string, arg ast.Expr, at token.Pos) {
			key := path.Dir(rel) + " " + types.ExprString(arg)
			if name, ok := literal(arg); ok {
				if _, dup := found[name]; !dup {
					found[name] = fset.Position(at).String()
				}
				return
			}
			if types.ExprString(arg) == "os.Args[0]" {
				return // the running binary itself, wherever it is
			}
			names, ok := declared[key]
			if !ok {
				undeclared = append(undeclared, site{key: key, pos: fset.Position(at).String()})
				return
			}
			seen[key] = true
			for _, n := range names {
				if n == "self" || n == "playbook" || n == "caller" {
					continue
				}
				if _, dup := found[n]; !dup {
					found[n] = fset.Position(at).String() + " (declared)"
				}
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range declared {
		if !seen[key] {
			t.Errorf("declared lists %s, where the scan finds no exec site whose program it cannot read: remove it", key)
		}
	}
	return found, undeclared
}

// fileSites calls site for every place f runs a program, with the expression naming the
// program and the enclosing function's name.
func fileSites(f *ast.File, site func(fn string, arg ast.Expr, at token.Pos)) {
	execName, toolsName, transportName := "", "", ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		switch {
		case p == "os/exec":
			execName = name
		case strings.HasSuffix(p, "/internal/tools"):
			toolsName = name
		case strings.HasSuffix(p, "/rig/transport"):
			transportName = name
		}
	}
	inTransport := f.Name.Name == "transport"
	for _, decl := range f.Decls {
		fn := ""
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				idx := -1
				switch {
				case x.Name == execName && (sel.Sel.Name == "Command" || sel.Sel.Name == "LookPath"):
					idx = 0
				case x.Name == execName && sel.Sel.Name == "CommandContext":
					idx = 1
				case x.Name == toolsName && sel.Sel.Name == "Require":
					idx = 1
				case x.Name == toolsName && sel.Sel.Name == "Lookup":
					idx = 0
				}
				if idx >= 0 && idx < len(n.Args) {
					site(fn, n.Args[idx], n.Pos())
				}
			case *ast.CompositeLit:
				if !isCmd(n.Type, transportName, inTransport) {
					return true
				}
				for _, e := range n.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok || !isIdent(kv.Key, "Args") {
						continue
					}
					if args, ok := kv.Value.(*ast.CompositeLit); ok && len(args.Elts) > 0 {
						site(fn, args.Elts[0], kv.Pos())
					} else {
						site(fn, kv.Value, kv.Pos())
					}
				}
			}
			return true
		})
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func isCmd(e ast.Expr, transportName string, inTransport bool) bool {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		return isIdent(sel.X, transportName) && transportName != "" && sel.Sel.Name == "Cmd"
	}
	return inTransport && isIdent(e, "Cmd")
}

// literal is the program e names when it is a string literal, or a constant or variable
// declared with one in the same file; a path is named by its last element.
func literal(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return path.Base(s), err == nil
	case *ast.CallExpr:
		if isIdent(e.Fun, "append") && len(e.Args) > 0 { // append([]string{"prog", ...}, more...)
			if c, ok := e.Args[0].(*ast.CompositeLit); ok && len(c.Elts) > 0 {
				return literal(c.Elts[0])
			}
		}
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && isIdent(sel.X, "exec") && sel.Sel.Name == "LookPath" && len(e.Args) == 1 {
			return literal(e.Args[0]) // p, err := exec.LookPath("prog")
		}
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && isIdent(sel.X, "tools") { // its path
			switch {
			case sel.Sel.Name == "Require" && len(e.Args) == 2:
				return literal(e.Args[1])
			case sel.Sel.Name == "Lookup" && len(e.Args) == 1:
				return literal(e.Args[0])
			}
		}
	case *ast.Ident:
		if e.Obj == nil {
			return "", false
		}
		switch d := e.Obj.Decl.(type) {
		case *ast.ValueSpec:
			for i, n := range d.Names {
				if n.Name == e.Name && i < len(d.Values) {
					return literal(d.Values[i])
				}
			}
		case *ast.AssignStmt: // x := tools.Require(t, "prog"); p, err := tools.Lookup("prog")
			for i, n := range d.Lhs {
				if isIdent(n, e.Name) && (i < len(d.Rhs) && len(d.Rhs) == len(d.Lhs) || i == 0 && len(d.Rhs) == 1) {
					return literal(d.Rhs[min(i, len(d.Rhs)-1)])
				}
			}
		}
	}
	return "", false
}
