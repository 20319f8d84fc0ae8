package disk

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncfs writes back the dirty pages and the journal of the one filesystem holding dir, not the
// whole machine's.
func syncfs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
