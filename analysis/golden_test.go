package analysis

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata from the current analysis")

// TestGoldenRun analyses a real run folder stored under testdata (a short local run of
// testdata/golden-run.yaml, engine data, logs and plots left out) and compares summary.json and
// report.md with the checked-in golden files. A change to any figure of the report for the same
// input shows here; when it is intended, rerun with -update and say why in the commit.
func TestGoldenRun(t *testing.T) {
	dir := copyTree(t, filepath.Join("testdata", "golden-run"))
	s, err := Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteOutputs(dir, s); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"summary.json", "report.md"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "golden-run."+name)
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./results -run TestGoldenRun -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s:\n%s", name, golden, lineDiff(string(want), string(got)))
		}
	}
}

// copyTree copies a stored run folder into a temporary one, so that writing outputs never
// touches testdata.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if de.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// lineDiff lists the lines that differ, by line number: enough to see which figure moved.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
