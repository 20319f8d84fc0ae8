package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// The stable file holds every key at once and is replaced whole on each Set (raft sets
// CurrentTerm, LastVoteTerm and LastVoteCand a few times per election, never on the hot path):
//
//	"RIGSTBL1" | u32 count | count × (u32 len | key | u32 len | value) | u32 CRC-32C of all before
const (
	stableName     = "stable.dat"
	stableLockName = "stable.lock"
	stableMagic    = "RIGSTBL1"
)

// Stable is a raft.StableStore kept in one small file, rewritten atomically (temp file, sync,
// rename, directory sync) at the sync level. A missing key is ErrNotFound ("not found").
type Stable struct {
	dir   string
	level SyncLevel
	log   *slog.Logger
	lock  *os.File

	mu     sync.Mutex
	kv     map[string][]byte
	closed bool

	stats counters
}

var _ raft.StableStore = (*Stable)(nil)

// OpenStable opens (creating if needed) the stable store in dir. A damaged file is an error:
// silently forgetting the current term or a vote would break raft's safety.
func OpenStable(dir string, opts Options) (*Stable, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open stable store in %s: %w", dir, err)
	}
	if err := ensureDir(dir, opts.SyncLevel); err != nil {
		return nil, fmt.Errorf("open stable store in %s: %w", dir, err)
	}
	lock, err := lockFile(filepath.Join(dir, stableLockName))
	if err != nil {
		return nil, fmt.Errorf("open stable store in %s: %w", dir, err)
	}
	s := &Stable{dir: dir, level: opts.SyncLevel, log: opts.Logger.With("component", "raft-stable", "dir", dir), lock: lock}
	s.stats.onSync = opts.OnSync
	err = removeTemp(dir, stableName)
	if err == nil {
		s.kv, err = readStable(filepath.Join(dir, stableName))
	}
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open stable store in %s: %w", dir, err)
	}
	s.log.Debug("stable store opened", "keys", len(s.kv))
	return s, nil
}

func readStable(path string) (map[string][]byte, error) {
	kv := map[string][]byte{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return kv, nil
	}
	if err != nil {
		return nil, err
	}
	bad := func(what string) error {
		return fmt.Errorf("%w: %s: %s (%d bytes)", ErrCorrupt, path, what, len(b))
	}
	if len(b) < len(stableMagic)+8 || string(b[:len(stableMagic)]) != stableMagic {
		return nil, bad("bad magic or size")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, bad("checksum mismatch")
	}
	rest := body[len(stableMagic):]
	n := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	for i := uint32(0); i < n; i++ {
		var k, v []byte
		if k, rest, err = takeBytes(rest); err == nil {
			v, rest, err = takeBytes(rest)
		}
		if err != nil {
			return nil, bad(fmt.Sprintf("entry %d of %d: %v", i, n, err))
		}
		kv[string(k)] = v
	}
	if len(rest) != 0 {
		return nil, bad(fmt.Sprintf("%d stray bytes after %d entries", len(rest), n))
	}
	return kv, nil
}

func encodeStable(kv map[string][]byte) []byte {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys) // same contents, same bytes
	b := append([]byte(stableMagic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[len(stableMagic):], uint32(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[k])))
		b = append(b, kv[k]...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Set implements raft.StableStore; it returns once the new value is durable at the level.
func (s *Stable) Set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	next := make(map[string][]byte, len(s.kv)+1)
	for k, v := range s.kv {
		next[k] = v
	}
	next[string(key)] = slices.Clone(val)
	if err := writeFileAtomic(s.dir, stableName, encodeStable(next), s.level, &s.stats); err != nil {
		return fmt.Errorf("set stable key %q: %w", key, err)
	}
	s.kv = next
	return nil
}

// Get implements raft.StableStore; a missing key returns ErrNotFound.
func (s *Stable) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	v, ok := s.kv[string(key)]
	if !ok {
		return nil, ErrNotFound
	}
	return slices.Clone(v), nil
}

// SetUint64 implements raft.StableStore (8 bytes, big endian, as raft-boltdb stores it).
func (s *Stable) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore; a missing key returns 0 and ErrNotFound.
func (s *Stable) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable key %q holds %d bytes, not a uint64", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// Stats reports the store's sync calls (the other counters stay 0).
func (s *Stable) Stats() Stats {
	return Stats{Syncs: s.stats.syncs.Load(), SyncNanos: s.stats.syncNanos.Load()}
}

// Close releases the directory lock; every Set was already durable when it returned.
func (s *Stable) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.lock.Close()
}
