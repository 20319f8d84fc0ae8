package playbooks

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/untrusted"
)

// The playbooks shipped in the binary, so `rig run quickstart` works anywhere.
//
//go:embed *.yaml
var embedded embed.FS

// List returns the names of the embedded playbooks, sorted.
func List() []string {
	entries, _ := fs.Glob(embedded, "*.yaml")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e, ".yaml"))
	}
	sort.Strings(names)
	return names
}

// Open reads a playbook from a file, or by the name of an embedded one ("quickstart"). A path
// that does not exist but names an embedded playbook inside a playbooks/ folder
// ("playbooks/quickstart.yaml", as the docs write it) falls back to the embedded copy, so the
// documented commands work from any directory. Content problems come back as Problems.
//
// (It is not called Load because the contract's type Load, the client stream, owns that name.)
func Open(nameOrPath string, drivers *driver.Registry) (*Playbook, error) {
	if st, err := os.Stat(nameOrPath); err == nil && !st.IsDir() {
		if st.Size() > MaxSize { // refused before anything is read
			return nil, tooBig(nameOrPath, st.Size())
		}
		data, err := untrusted.ReadFile(nameOrPath, "playbook") // a regular file, never blocking
		if errors.Is(err, untrusted.ErrTooLarge) {
			return nil, tooBig(nameOrPath, MaxSize+1) // it grew since the Stat
		} else if err != nil {
			return nil, err
		}
		return Parse(nameOrPath, data, drivers)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read playbook %s: %w", nameOrPath, err)
	}
	name := nameOrPath
	if looksLikePath(nameOrPath) {
		dir, base := filepath.Split(filepath.Clean(nameOrPath))
		name = strings.TrimSuffix(base, filepath.Ext(base))
		if filepath.Base(filepath.Clean(dir)) != "playbooks" || !isEmbedded(name) {
			return nil, fmt.Errorf("%w: no file %s (embedded playbooks: %s)", ErrNotFound, nameOrPath, strings.Join(List(), ", "))
		}
	}
	if !isEmbedded(name) {
		return nil, fmt.Errorf("%w: %q is neither a file nor an embedded playbook%s (embedded: %s)",
			ErrNotFound, nameOrPath, suggest(name, List()), strings.Join(List(), ", "))
	}
	data, err := embedded.ReadFile(name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("read embedded playbook %s: %w", name, err)
	}
	p, err := Parse(name+".yaml", data, drivers)
	if err != nil {
		return nil, err
	}
	p.Source = "embedded:" + name
	return p, nil
}

func looksLikePath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.ContainsRune(s, filepath.Separator) ||
		strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml")
}

func isEmbedded(name string) bool {
	for _, n := range List() {
		if n == name {
			return true
		}
	}
	return false
}
