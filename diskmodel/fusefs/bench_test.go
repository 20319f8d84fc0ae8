package fusefs

import (
	"os"
	"testing"

	"github.com/rig-dev/rig/diskmodel"
)

// BenchmarkPassThrough is the FUSE layer's own cost: the same writes on the bare folder and
// through a model with no limits, side by side in one run (go test -bench PassThrough).
func BenchmarkPassThrough(b *testing.B) {
	for _, w := range []struct {
		name  string
		block int64
		sync  bool
	}{
		{"write-1MiB", 1 << 20, false},
		{"write-1MiB+fsync", 1 << 20, true},
		{"write-4KiB+fsync", 4 << 10, true},
	} {
		for _, via := range []string{"bare", "model"} {
			b.Run(w.name+"/"+via, func(b *testing.B) {
				dir := b.TempDir()
				if via == "model" {
					d, _ := mountT(b, diskmodel.Limits{})
					dir = d.Dir()
				}
				f, err := os.CreateTemp(dir, "bench-")
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
