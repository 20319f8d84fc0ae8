// Package scaffold writes the starting point of a user's own engine: for `rig new aeron-service`,
// a Maven module that runs a ClusteredService under rig-aeron (pom against the installed
// rig-aeron-parent, a codec skeleton, a main), a playbook, and the example's start script and
// node template, all from the files embedded from examples/aeron-cluster.
package scaffold

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/rig-dev/rig/engine/driver"
	aeroncluster "github.com/rig-dev/rig/examples/aeron-cluster"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
)

// ErrInvalid classifies bad input (a name, a class, a package, a taken folder): nothing was written.
var ErrInvalid = errors.New("invalid scaffold input")

// Options say what to write and where; the field comments name the flags of `rig new aeron-service`.
type Options struct {
	Parent  string // --dir: the folder the module's folder is made in
	Name    string // NAME: the module's folder, artifact, jar and playbook name
	Service string // --service: the ClusteredService's fully qualified class name
	Package string // --package: the Java package of Main and Codec; "" for DefaultPackage(Service)
	// Drivers are the engine drivers the written playbook is read with, as `rig run` reads it.
	Drivers *driver.Registry
}

// Parent is the rig-aeron parent pom's coordinates, read from examples/aeron-cluster/pom.xml.
type Parent struct {
	GroupID      string `xml:"groupId"`
	ArtifactID   string `xml:"artifactId"`
	Version      string `xml:"version"`
	AeronVersion string `xml:"properties>aeron.version"`
}

// templateDir holds the scaffold's own templates inside aeroncluster.Files; they use [[ ]] so
// that the playbook's {{ }} (rig's per-node templates) pass through as they are.
const templateDir = "scaffold"

// DefaultPackage is where Main and Codec go when no package is given: a "rig" package under the
// service's own.
func DefaultPackage(service string) string {
	if i := strings.LastIndexByte(service, '.'); i > 0 {
		return service[:i] + ".rig"
	}
	return "rig"
}

// AeronService writes the module folder Parent/Name and returns it with the files written,
// relative to it. The folder must not exist or be empty; on any error nothing is left behind.
func AeronService(o Options) (string, []string, error) {
	if o.Package == "" {
		o.Package = DefaultPackage(o.Service)
	}
	if err := o.check(); err != nil {
		return "", nil, err
	}
	parent, err := readParent()
	if err != nil {
		return "", nil, err
	}
	dir := filepath.Join(o.Parent, o.Name)
	if err := freeFolder(dir); err != nil {
		return "", nil, err
	}
	files, err := render(o, parent)
	if err != nil {
		return "", nil, err
	}
	// Written beside the target and renamed into place, so a failure half-way leaves nothing.
	tmp, err := os.MkdirTemp(o.Parent, "."+o.Name+".new-")
	if err != nil {
		return "", nil, fmt.Errorf("creating the module folder in %s: %w", o.Parent, err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's 0700 is not a module folder's
		return "", nil, err
	}
	var names []string
	for _, f := range files {
		p := filepath.Join(tmp, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", nil, fmt.Errorf("writing %s: %w", f.name, err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return "", nil, fmt.Errorf("writing %s: %w", f.name, err)
		}
		names = append(names, f.name)
	}
	// The playbook is read as `rig run` would read it: a scaffold that does not open is a rig bug.
	if _, err := playbooks.Open(filepath.Join(tmp, "playbook.yaml"), o.Drivers); err != nil {
		return "", nil, fmt.Errorf("the written playbook does not open: %w", err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("replacing the empty folder %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", nil, fmt.Errorf("moving the module into %s: %w", dir, err)
	}
	return dir, names, nil
}

// javaNameRe is a dotted Java name; keywords are refused separately (javac would).
var javaNameRe = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*$`)

// javaKeywords are Java's reserved words and literals, which no part of a Java name may be.
var javaKeywords = wordSet(`abstract assert boolean break byte case catch char class const continue default do
	double else enum extends final finally float for goto if implements import instanceof int interface long native
	new package private protected public return short static strictfp super switch synchronized this throw throws
	transient try void volatile while true false null _`)

// wordSet is the set of the whitespace-separated words of s.
func wordSet(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(s) {
		out[w] = true
	}
	return out
}

func checkJavaName(what, s, example string) error {
	if !javaNameRe.MatchString(s) {
		return fmt.Errorf("%w: %s %q: want a dotted Java name, e.g. %s", ErrInvalid, what, s, example)
	}
	for _, part := range strings.Split(s, ".") {
		if javaKeywords[part] {
			return fmt.Errorf("%w: %s %q: %q is a Java keyword", ErrInvalid, what, s, part)
		}
	}
	return nil
}

func (o Options) check() error {
	if err := inventory.CheckName("NAME", o.Name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(o.Name) > playbooks.MaxNameLen {
		return fmt.Errorf("%w: NAME is %d bytes long, at most %d (it is the playbook's name)", ErrInvalid, len(o.Name), playbooks.MaxNameLen)
	}
	if o.Service == "" {
		return fmt.Errorf("%w: --service is required: the ClusteredService's class, e.g. io.aeron.samples.cluster.EchoService", ErrInvalid)
	}
	if err := checkJavaName("--service", o.Service, "io.aeron.samples.cluster.EchoService"); err != nil {
		return err
	}
	if err := checkJavaName("--package", o.Package, "com.example.myservice.rig"); err != nil {
		return err
	}
	if fi, err := os.Stat(o.Parent); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: --dir %s: not a folder (the module's folder is made in it)", ErrInvalid, o.Parent)
	}
	return nil
}

// freeFolder refuses a target that exists and is not an empty folder.
func freeFolder(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s exists and is not a folder; pick another NAME or --dir", ErrInvalid, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s exists and is not empty (%d entries); pick another NAME or --dir, nothing is overwritten", ErrInvalid, dir, len(entries))
	}
	return nil
}

func readParent() (Parent, error) {
	b, err := fs.ReadFile(aeroncluster.Files, "pom.xml")
	if err != nil {
		return Parent{}, err
	}
	var p Parent
	if err := xml.Unmarshal(b, &p); err != nil {
		return Parent{}, fmt.Errorf("reading the rig-aeron parent pom: %w", err)
	}
	if p.GroupID == "" || p.ArtifactID == "" || p.Version == "" || p.AeronVersion == "" {
		return Parent{}, fmt.Errorf("the rig-aeron parent pom lacks groupId, artifactId, version or aeron.version: %+v", p)
	}
	return p, nil
}

type file struct {
	name string // slash-separated, relative to the module folder
	data []byte
	mode fs.FileMode
}

// render makes every file in memory: the templates of templateDir, and the example's start script
// and node template as they are.
func render(o Options, parent Parent) ([]file, error) {
	data := struct {
		Options
		Parent Parent
	}{o, parent}
	src := path.Join("src/main/java", strings.ReplaceAll(o.Package, ".", "/"))
	outputs := map[string]string{
		"pom.xml.tmpl":       "pom.xml",
		"playbook.yaml.tmpl": "playbook.yaml",
		"README.md.tmpl":     "README.md",
		"Main.java.tmpl":     path.Join(src, "Main.java"),
		"Codec.java.tmpl":    path.Join(src, "Codec.java"),
	}
	entries, err := fs.ReadDir(aeroncluster.Files, templateDir)
	if err != nil {
		return nil, err
	}
	var files []file
	for _, e := range entries {
		out, ok := outputs[e.Name()]
		if !ok {
			return nil, fmt.Errorf("scaffold template %s has no output file", e.Name())
		}
		t, err := template.New(e.Name()).Delims("[[", "]]").Option("missingkey=error").
			ParseFS(aeroncluster.Files, path.Join(templateDir, e.Name()))
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", e.Name(), err)
		}
		files = append(files, file{out, b.Bytes(), 0o644})
	}
	for _, name := range []string{"start-node.sh", "node.properties.tmpl"} {
		b, err := fs.ReadFile(aeroncluster.Files, name)
		if err != nil {
			return nil, err
		}
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		files = append(files, file{name, b, mode})
	}
	return files, nil
}
