package archive

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// What a killed run leaves that holds no data (its control sockets, a FIFO) and a filesystem
// mounted inside the run folder are skipped and named, in the manifest and in ArchiveAll's
// output; the rest is archived and verified as usual.
func TestArchiveSkipsSocketsFIFOsAndMounts(t *testing.T) {
	run := makeRun(t, 1<<10)
	ctl := filepath.Join(run, "client-0", "ctl")
	if err := os.MkdirAll(ctl, 0o700); err != nil {
		t.Fatal(err)
	}
	short, err := os.MkdirTemp("", "s") // a socket path has at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	l, err := net.Listen("unix", filepath.Join(short, "s"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // left behind, as by a killed load generator
	if err := os.Rename(filepath.Join(short, "s"), filepath.Join(ctl, "loadgen.sock")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(run, "node-0", "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"client-0/ctl/loadgen.sock": "a socket, not data",
		"node-0/pipe":               "a FIFO, not data",
	}
	if os.Geteuid() == 0 {
		mp := filepath.Join(run, "node-0", "disk")
		os.MkdirAll(mp, 0o755)
		if err := syscall.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err == nil {
			t.Cleanup(func() { syscall.Unmount(mp, syscall.MNT_DETACH) })
			os.WriteFile(filepath.Join(mp, "through-the-mount"), []byte("x"), 0o644)
			want["node-0/disk"] = "another filesystem is mounted there"
		}
	}
	var out bytes.Buffer
	dest := Dir{Path: t.TempDir()}
	if err := ArchiveAll(context.Background(), dest, []string{run}, &out); err != nil {
		t.Fatalf("archive: %v", err)
	}
	m, err := Verify(context.Background(), dest, filepath.Base(run))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range m.Skipped {
		got[strings.TrimPrefix(s.Path, m.RunID+"/")] = s.Why
	}
	for p, why := range want {
		if got[p] != why {
			t.Errorf("skipped %s: %q, want %q", p, got[p], why)
		}
		if !strings.Contains(out.String(), "skipped "+m.RunID+"/"+p+": "+why) {
			t.Errorf("output does not name %s:\n%s", p, out.String())
		}
	}
	if len(got) != len(want) {
		t.Errorf("skipped %v, want %v", got, want)
	}
	for _, f := range m.Files {
		if strings.Contains(f.Path, "through-the-mount") {
			t.Errorf("archived %s from the mount", f.Path)
		}
	}
	if len(m.Files) != 5 {
		t.Errorf("archived %d files, want makeRun's 5", len(m.Files))
	}
	t.Logf("%s", out.String())
}
