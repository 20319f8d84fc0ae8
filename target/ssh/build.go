package ssh

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModulePath is the rig module, for recognising its source tree.
const ModulePath = "github.com/rig-dev/rig"

// BuildOptions describe a cross build.
type BuildOptions struct {
	Dir     string // module folder
	Package string // e.g. "./cmd/rig"
	GOARCH  string // GOOS is always linux: nodes are Linux
	Out     string
}

// CrossBuild builds a static linux binary with the go tool (CGO off, so it runs on any distro).
func CrossBuild(ctx context.Context, o BuildOptions) error {
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", o.Out, o.Package)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+o.GOARCH, "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cross-build %s for linux/%s in %s: %v\n%s", o.Package, o.GOARCH, o.Dir, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// FindSource returns the rig module folder containing dir (or a parent of it), "" if none.
func FindSource(dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for d := dir; ; d = filepath.Dir(d) {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == "module "+ModulePath {
					f.Close()
					return d
				}
			}
			f.Close()
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}
