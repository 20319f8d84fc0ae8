package aeroncluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// TestStoredBook: two runs of a playbook with a 20K-order preload share a results folder. The
// first preloads through the cluster's log, and its book is captured from the leader's data
// once the engines stopped (engine.book_capture: book.sh) and stored with its state hash and
// Aeron version; the second installs it in every server's data folder before the JVMs start,
// skips the preload, and every node restores the snapshot at log position 0 and ends with the
// first run's state hash. A third run, its stored book said to be from another Aeron version, is
// refused before any engine starts, naming both versions; a fourth, its stored hash changed,
// fails once ready, naming the node's hash and the stored one.
func TestStoredBook(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster twice")
	}
	build(t)
	bin := rigBinary(t)
	res := t.TempDir()
	seen := map[string]bool{}
	run := func(wantErr bool) (*rundir.Manifest, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "run", "-q", "--results", res, "--first-address", "127.0.19.95", "testdata/stored-book.yaml")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if (err != nil) != wantErr {
			t.Fatalf("rig run: error %v, want error %v\n%s", err, wantErr, out.String())
		}
		if wantErr {
			return nil, "", out.String()
		}
		mans, _ := filepath.Glob(filepath.Join(res, "*", rundir.ManifestFile))
		for _, m := range mans {
			if !seen[m] {
				seen[m] = true
				man, err := rundir.ReadManifest(filepath.Dir(m))
				if err != nil {
					t.Fatal(err)
				}
				return man, filepath.Dir(m), out.String()
			}
		}
		t.Fatalf("no new run in %s\n%s", res, out.String())
		return nil, "", ""
	}
	hashes := func(dir string) []string {
		var out []string
		for _, n := range []string{"node-0", "node-1", "node-2"} {
			var st engine.Status
			b, err := os.ReadFile(filepath.Join(dir, n, rundir.StatusFile))
			if err == nil {
				err = json.Unmarshal(b, &st)
			}
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			if st.Orders != 20_000 {
				t.Errorf("%s ended with %d orders, want 20000", n, st.Orders)
			}
			out = append(out, st.StateHash)
		}
		return out
	}

	start := time.Now()
	m1, dir1, out1 := run(false)
	if m1.Book == nil || m1.Book.Reused || !m1.Book.Stored {
		dumpLogs(t, dir1)
		t.Fatalf("first run: book %+v, want built through the log and stored\n%s", m1.Book, out1)
	}
	h1 := hashes(dir1)
	if h1[0] == "" || h1[1] != h1[0] || h1[2] != h1[0] {
		t.Fatalf("first run ended with state hashes %v, want one", h1)
	}
	recPath := filepath.Join(res, "books", m1.Book.Key+".aeron-cluster.json")
	b, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		StateHash     string   `json:"state_hash"`
		Files         []string `json:"files"`
		EngineVersion string   `json:"engine_version"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	jars, _ := filepath.Glob("matching/target/lib/aeron-all-*.jar")
	if len(jars) != 1 || rec.EngineVersion != strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "aeron-all-"), ".jar") {
		t.Errorf("stored book's engine version %q, want the one of %v", rec.EngineVersion, jars)
	}
	if rec.StateHash != h1[0] || !slices.Contains(rec.Files, "aeron-cluster/cluster/recording.log") {
		t.Errorf("stored book %s: %s", recPath, b)
	}
	t.Logf("first run (preloaded, captured): %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	m2, dir2, out2 := run(false)
	if m2.Book == nil || !m2.Book.Reused || m2.Book.BuiltBy != m1.RunID || m2.Book.StateHash != h1[0] {
		dumpLogs(t, dir2)
		t.Fatalf("second run: book %+v, want the first run's (%s, %s) installed\n%s", m2.Book, m1.RunID, h1[0], out2)
	}
	if h2 := hashes(dir2); !slices.Equal(h2, h1) {
		t.Errorf("second run ended with state hashes %v, want the first run's %v", h2, h1)
	}
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		log, _ := os.ReadFile(filepath.Join(dir2, n, "engine.log"))
		if !strings.Contains(string(log), "restored snapshot at log position 0") {
			t.Errorf("%s's engine.log does not say it restored the stored snapshot", n)
		}
	}
	t.Logf("second run (installed): %s", time.Since(start).Round(time.Millisecond))

	// The same book said to come from another Aeron version: refused before any JVM starts.
	if err := os.WriteFile(recPath, bytes.Replace(b, []byte(`"engine_version": "`+rec.EngineVersion), []byte(`"engine_version": "0.0.1`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, out3 := run(true)
	if !strings.Contains(out3, `captured on engine version "0.0.1"`) || !strings.Contains(out3, rec.EngineVersion) {
		t.Errorf("a stored book of another version: want an error naming both versions, got\n%s", out3)
	}
	// Its record's state hash not the one its files restore: the run fails once the cluster is
	// ready, naming the node and both hashes.
	if err := os.WriteFile(recPath, bytes.Replace(b, []byte(`"state_hash": "`+h1[0]), []byte(`"state_hash": "0123456789abcdef`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, out4 := run(true)
	if !strings.Contains(out4, "with state hash "+h1[0]) || !strings.Contains(out4, "hash 0123456789abcdef") {
		t.Errorf("a stored book whose hash is not its files': want an error naming both hashes, got\n%s", out4)
	}
}
