package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/transport"
)

// An engine that captures its own book (engine.book_capture, playbooks.Engine.BookCapture) has
// the book a run preloaded taken as its own snapshot on the leader once the final state is
// read, and, once the engines stopped and before their data is removed, turned by its capture
// command into files that start a fresh cluster from that snapshot (the Aeron engine: the
// snapshot's recordings, its archive catalog and a recording log naming them). storeBook keeps
// them when the run ended well and every server ended with the state they hold.

// bookCaptureDir is where on the capturing server the capture command writes the book's files
// (relative to the node's folder), removed once they are fetched.
const bookCaptureDir = "book-capture"

// capturedBook is a book captured from one server's data, fetched into the book store's staging
// folder (the stored book's folder + ".tmp").
type capturedBook struct {
	node      string
	files     []string
	version   string
	stateHash string
	orders    int64
	took      time.Duration
}

// captureFrom decides, before the engines stop, whether this run captures its book: only when
// every server ended with one state (status.json, written once by finalState before this), the
// state the capture then holds. If so it has the leader take a snapshot of it and says which
// server to capture from and the state it holds (ok false: none).
func (r *run) captureFrom(ctx context.Context, runErr error) (from string, hash string, orders int64, ok bool) {
	if r.book == nil || r.book.Reused || r.installer != nil || r.pb.Engine.BookCapture() == nil || runErr != nil {
		return "", "", 0, false
	}
	_, rec := r.bookPaths(r.book.Key)
	if _, err := os.Stat(rec); err == nil {
		return "", "", 0, false // storeBook says "already stored"
	}
	hash, orders, err := r.finalHash()
	if err != nil {
		r.captureFailed("%v", err)
		return "", "", 0, false
	}
	leader := r.leader()
	if leader == "" {
		r.captureFailed("no leader to take the snapshot")
		return "", "", 0, false
	}
	if _, err := r.agent(leader).EngineAdmin(ctx, engine.AdminSnapshot); err != nil {
		r.captureFailed("snapshot on %s: %v", leader, err)
		return "", "", 0, false
	}
	r.progress("snapshot of book %s (state hash %s) taken on %s for capture", r.book.Key, hash, leader)
	return leader, hash, orders, true
}

// captureBook runs the engine's capture command on server name, whose engine has stopped, and
// fetches the files it wrote into the book store's staging folder: a book of the state hash and
// orders every server ended with (captureFrom).
func (r *run) captureBook(ctx context.Context, name, hash string, orders int64) {
	start := time.Now()
	i := slices.IndexFunc(r.servers, func(n inventory.Node) bool { return n.Name == name })
	if i < 0 {
		r.captureFailed("%s is not a server", name)
		return
	}
	n := r.servers[i]
	version, err := r.engineVersion(ctx, n)
	if err != nil {
		r.captureFailed("%v", err)
		return
	}
	out := r.cl.NodePath(n, bookCaptureDir)
	defer func() {
		if err := r.cl.Remove(ctx, n, out); err != nil {
			r.warn("remove %s on %s: %v", out, n.Name, err)
		}
	}()
	captureArgv := append(r.pb.Engine.BookCapture(), "capture", r.dataPath(n, ""), out)
	res, err := r.cl.Transport().Exec(ctx, n, transport.Cmd{Args: captureArgv})
	if err != nil {
		r.captureFailed("%s on %s: %v\n%s", strings.Join(captureArgv, " "), n.Name, err, bytes.TrimSpace(res.Stderr))
		return
	}
	files := strings.Fields(string(res.Stdout))
	if len(files) == 0 {
		r.captureFailed("%s on %s named no files", strings.Join(captureArgv, " "), n.Name)
		return
	}
	book, _ := r.bookPaths(r.book.Key)
	stage := book + ".tmp"
	os.RemoveAll(stage)
	for _, f := range files {
		if !filepath.IsLocal(filepath.FromSlash(f)) {
			r.captureFailed("the capture named %q: want a path inside the data folder", f)
			return
		}
		local := filepath.Join(stage, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			r.captureFailed("%v", err)
			return
		}
		if err := r.cl.Transport().Download(ctx, n, out+"/"+f, local); err != nil {
			r.captureFailed("fetch %s from %s: %v", f, n.Name, err)
			return
		}
	}
	r.captured = &capturedBook{node: n.Name, files: files, version: version, stateHash: hash, orders: orders, took: time.Since(start)}
	r.progress("captured book %s from %s: %d files, engine version %s, in %s", r.book.Key, n.Name, len(files), version, r.captured.took.Round(time.Millisecond))
}

// storeCapturedBook keeps the captured book (of the state every server ended with: captureFrom).
func (r *run) storeCapturedBook(notStored func(string, ...any)) {
	bk, c := r.book, r.captured
	book, recPath := r.bookPaths(bk.Key)
	if c == nil {
		reason := r.captureErr
		if reason == "" {
			reason = "not captured"
		}
		notStored("%s", reason)
		return
	}
	start := time.Now()
	// The capture's own time, spent before the engines stopped, is the store's too.
	d, err := r.keepBook(book, recPath, bookRecord{Key: bk.Key, Orders: c.orders, StateHash: c.stateHash, BuiltBy: r.id,
		Files: c.files, EngineVersion: c.version}, start.Add(-c.took))
	if err != nil {
		notStored("%v", err)
		return
	}
	r.progress("stored book %s (%d orders, state hash %s, captured from %s, engine version %s) in %s for later runs",
		bk.Key, c.orders, c.stateHash, c.node, c.version, d.Round(time.Millisecond))
}

// checkBookVersion refuses a stored captured book that the engine's version cannot restore.
func (r *run) checkBookVersion(ctx context.Context, book string, rec bookRecord) error {
	if r.installer != nil || len(r.servers) == 0 {
		return nil
	}
	v, err := r.engineVersion(ctx, r.servers[0])
	if err != nil {
		return fmt.Errorf("stored book %s: %w", book, err)
	}
	if v != rec.EngineVersion {
		return fmt.Errorf("stored book %s was captured on engine version %q and this engine is version %q: a captured book restores only on its own version; remove %s and its .json to preload through the log again",
			book, rec.EngineVersion, v, book)
	}
	return nil
}

// engineVersion is what the engine's capture command says its version is, on server n.
func (r *run) engineVersion(ctx context.Context, n inventory.Node) (string, error) {
	captureArgv := append(r.pb.Engine.BookCapture(), "version")
	res, err := r.cl.Transport().Exec(ctx, n, transport.Cmd{Args: captureArgv})
	if err != nil {
		return "", fmt.Errorf("engine version (%s on %s): %w\n%s", strings.Join(captureArgv, " "), n.Name, err, bytes.TrimSpace(res.Stderr))
	}
	v := strings.TrimSpace(string(res.Stdout))
	if v == "" || strings.ContainsAny(v, "\n") {
		return "", fmt.Errorf("engine version (%s on %s): want one line, got %q", strings.Join(captureArgv, " "), n.Name, v)
	}
	return v, nil
}

// finalHash is the state hash and orders every server ended with (<node>/status.json), or why
// there is none.
func (r *run) finalHash() (string, int64, error) {
	hashes := map[string]bool{}
	var orders int64
	for _, n := range r.servers {
		var st engine.Status
		b, err := os.ReadFile(filepath.Join(r.dir, n.Name, rundir.StatusFile))
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			return "", 0, fmt.Errorf("no final state of %s: %w", n.Name, err)
		}
		hashes[st.StateHash] = true
		orders = int64(st.Orders)
	}
	if len(hashes) != 1 || hashes[""] {
		return "", 0, fmt.Errorf("the servers ended with state hashes %v, not one", keys(hashes))
	}
	return keys(hashes)[0], orders, nil
}

// captureFailed notes why this run's book was not captured, for storeBook to say.
func (r *run) captureFailed(format string, args ...any) {
	r.captureErr = fmt.Sprintf(format, args...)
	r.log.Warn("book capture", "err", errors.New(r.captureErr))
}
