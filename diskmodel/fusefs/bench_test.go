package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rig-dev/rig/diskmodel"
)

// BenchmarkPassThrough is the FUSE layer's own cost: the same writes on the bare folder,
// through a model with no limits and through one mounted with passthrough, side by side in one
// run (go test -bench PassThrough), to a file open for reading and writing (as a log is) and
// to a write-only one (as a snapshot is).
func BenchmarkPassThrough(b *testing.B) {
	for _, w := range []struct {
		name   string
		block  int64
		sync   bool
		wronly bool // a write-only file: the model takes its writes past the page cache (directIO)
	}{
		{"write-1MiB", 1 << 20, false, false},
		{"write-1MiB+fsync", 1 << 20, true, false},
		{"write-4KiB+fsync", 4 << 10, true, false},
		{"wronly-1MiB", 1 << 20, false, true},
		{"wronly-1MiB+fsync", 1 << 20, true, true},
	} {
		for _, via := range []string{"bare", "model", "passthrough"} {
			b.Run(w.name+"/"+via, func(b *testing.B) {
				dir := b.TempDir()
				switch via {
				case "model":
					d, _ := mountT(b, diskmodel.Limits{})
					dir = d.Dir()
				case "passthrough":
					d, _ := mountOpts(b, Options{Passthrough: true})
					dir = d.Dir()
				}
				flag := os.O_RDWR
				if w.wronly {
					flag = os.O_WRONLY
				}
				f, err := os.OpenFile(filepath.Join(dir, "bench"), flag|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				buf := make([]byte, w.block)
				diskmodel.FillRandom(buf)
				const wrap = 64 << 20 // rewrite the first 64 MiB: the file stays small
				b.SetBytes(w.block)
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if _, err := f.WriteAt(buf, int64(i)*w.block%wrap); err != nil {
						b.Fatal(err)
					}
					if w.sync {
						if err := f.Sync(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
