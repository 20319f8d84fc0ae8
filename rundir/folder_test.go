package rundir_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/rundir"
)

// A run folder's names lead nowhere outside it: a file, a folder on the way and a chain of
// links that ends outside are refused as ErrOutside naming the link and its target; a link that
// stays inside is followed; writing through a symlinked folder is refused and writes nothing.
func TestFolderConfined(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644)
	os.MkdirAll(filepath.Join(dir, "node-0"), 0o755)
	os.WriteFile(filepath.Join(dir, "node-0", "status.json"), []byte("inside"), 0o644)
	for link, target := range map[string]string{
		"events.jsonl":        filepath.Join(outside, "secret"),
		"node-1":              outside,
		"hop":                 "../" + filepath.Base(outside) + "/secret", // relative, and out
		"chain":               "hop",                                      // inside, then out
		"node-0/inside.json":  "status.json",                              // stays inside
		"node-0/up.json":      "../node-0/status.json",                    // out and back in
		"plots":               outside,
		"node-0/samples-link": "../node-1",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	f := rundir.Folder{Dir: dir}
	for name, want := range map[string]string{
		"events.jsonl":        "events.jsonl: leads outside the run folder (a symlink to " + filepath.Join(outside, "secret") + "): refused",
		"node-1/secret":       "node-1/secret: leads outside the run folder (node-1 is a symlink to " + outside + "): refused",
		"chain":               "chain: leads outside the run folder (hop is a symlink to ../",
		"node-0/samples-link": "node-0/samples-link: leads outside the run folder (node-1 is a symlink to " + outside + ")",
	} {
		_, err := f.ReadFile(name, "file", 1<<20)
		if !errors.Is(err, rundir.ErrOutside) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant ErrOutside: %q", name, err, want)
		}
	}
	for _, name := range []string{"node-0/inside.json", "node-0/up.json"} {
		if b, err := f.ReadFile(name, "file", 1<<20); err != nil || string(b) != "inside" {
			t.Errorf("%s: %q, %v; want the file inside", name, b, err)
		}
	}
	if _, err := f.Open("nothere", "file"); !errors.Is(err, os.ErrNotExist) || errors.Is(err, rundir.ErrOutside) {
		t.Errorf("a missing file: %v", err)
	}
	err := f.WriteFile("plots/latency.png", func(w io.Writer) error { _, err := w.Write([]byte("png")); return err })
	if !errors.Is(err, rundir.ErrOutside) || !strings.Contains(err.Error(), "plots/latency.png: leads outside the run folder (plots is a symlink to "+outside) {
		t.Errorf("write through a symlinked plots: %v", err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 1 {
		t.Errorf("something was written outside: %v", es)
	}
	if err := f.WriteFile("report/x.md", func(w io.Writer) error { _, err := w.Write([]byte("md")); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "report", "x.md")); string(b) != "md" {
		t.Errorf("written %q", b)
	}
	names, err := f.Glob("*/samples/*.ndjson")
	if len(names) != 0 || !errors.Is(err, rundir.ErrOutside) || !strings.Contains(err.Error(), "node-1: leads outside") {
		t.Errorf("glob through a folder that leads out: %v, %v", names, err)
	}
}

// probes.bin is read up to the count declared and refused beyond it before a record is read;
// a truncated last record is dropped, not counted against the declaration.
func TestFolderProbesDeclared(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, rundir.LoadgenDir), 0o755)
	w, err := rundir.CreateProbes(filepath.Join(dir, rundir.ProbesPath))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		w.Write(rundir.Probe{IntendedNs: int64(i), LatencyNs: 5})
	}
	w.Close()
	fh, _ := os.OpenFile(filepath.Join(dir, rundir.ProbesPath), os.O_WRONLY|os.O_APPEND, 0)
	fh.Write(make([]byte, 16)) // a torn 11th record
	fh.Close()
	f := rundir.Folder{Dir: dir}
	os.WriteFile(filepath.Join(dir, rundir.LoadgenDir, rundir.StatsFile), []byte(`{"scheduled":10,"answered":9,"lost":1}`), 0o644)
	decl, err := f.DeclaredProbes()
	if err != nil || decl.N != 10 {
		t.Fatalf("declared %+v, %v", decl, err)
	}
	if ps, err := f.Probes(decl); err != nil || len(ps) != 10 {
		t.Fatalf("%d probes, %v", len(ps), err)
	}
	decl.N = 9
	_, err = f.Probes(decl)
	if !errors.Is(err, rundir.ErrUndeclared) || !strings.Contains(err.Error(), "loadgen/probes.bin holds 10 records (194 bytes); loadgen/stats.json declares 9") {
		t.Errorf("beyond the declared count: %v", err)
	}
	os.WriteFile(filepath.Join(dir, rundir.LoadgenDir, rundir.StatsFile), []byte(`{"scheduled":-5,"answered":9223372036854775807,"lost":9}`), 0o644)
	if decl, err := f.DeclaredProbes(); err != nil || decl.N != 1<<63-1 {
		t.Errorf("counts that overflow: %+v, %v", decl, err)
	}
}
