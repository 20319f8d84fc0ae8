package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// writeFileAtomic replaces dir/name with data: write a temp file, sync it at level, rename it
// over the old one, sync the directory. A crash leaves either the old or the new file whole.
func writeFileAtomic(dir, name string, data []byte, level SyncLevel, c *counters) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = c.sync(f, level)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return c.syncDir(dir, level)
}

// removeTemp deletes a temp file a crash left behind mid-writeFileAtomic (it never replaced
// the real file, so it holds nothing anyone relied on).
func removeTemp(dir, name string) error {
	err := os.Remove(filepath.Join(dir, name+".tmp"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// The log's meta file holds one number: the logical first index. Entries below it were
// deleted by prefix compaction even where they still sit in the first segment file.
const (
	metaName  = "log.meta"
	metaMagic = "RIGLOGM1"
	metaSize  = 8 + 8 + 4
)

func encodeMeta(first uint64) []byte {
	b := append([]byte(metaMagic), make([]byte, 12)...)
	binary.LittleEndian.PutUint64(b[8:], first)
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	return b
}

// readMeta returns 0 when there is no meta file (nothing was ever compacted).
func readMeta(dir string) (uint64, error) {
	path := filepath.Join(dir, metaName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != metaSize || string(b[:8]) != metaMagic ||
		crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:]) {
		return 0, fmt.Errorf("%w: %s: bad magic, size or checksum (%d bytes)", ErrCorrupt, path, len(b))
	}
	return binary.LittleEndian.Uint64(b[8:]), nil
}
