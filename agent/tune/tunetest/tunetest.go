// Package tunetest builds fake /proc/sys and /sys trees for tests of tuning.
package tunetest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FakeTree writes a /proc/sys and /sys tree under dir with the files a profile touches, in the
// kernel's own formats, and returns dir. For tests of this package and of the agent.
func FakeTree(t testing.TB, dir string) string {
	t.Helper()
	files := map[string]string{
		"proc/sys/vm/dirty_ratio":                    "20\n",
		"proc/sys/vm/dirty_bytes":                    "0\n",
		"proc/sys/vm/dirty_background_ratio":         "10\n",
		"proc/sys/vm/dirty_background_bytes":         "0\n",
		"proc/sys/vm/dirty_expire_centisecs":         "3000\n",
		"proc/sys/vm/dirty_writeback_centisecs":      "500\n",
		"proc/sys/vm/swappiness":                     "60\n",
		"proc/sys/net/core/rmem_max":                 "212992\n",
		"proc/sys/net/core/wmem_max":                 "212992\n",
		"proc/sys/net/core/rmem_default":             "212992\n",
		"proc/sys/net/core/wmem_default":             "212992\n",
		"proc/sys/net/core/netdev_max_backlog":       "1000\n",
		"sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
		"sys/kernel/mm/transparent_hugepage/defrag":  "always defer defer+madvise [madvise] never\n",
	}
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Snapshot maps every file under dir to its bytes and mode, to compare trees byte for byte.
func Snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = info.Mode().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
