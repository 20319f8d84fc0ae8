package loadavg

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	la, err := Parse("0.25 0.65 12.47 1/97 13445\n")
	if err != nil || la != (LoadAvg{0.25, 0.65, 12.47}) {
		t.Fatalf("Parse = %+v, %v", la, err)
	}
	for _, bad := range []string{"", "0.1 0.2", "0.1 x 0.3 1/2 3"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestReadRealAndRooted(t *testing.T) {
	if _, err := Read("/"); err != nil {
		t.Fatalf("this machine's /proc/loadavg: %v", err)
	}
	if Now() == nil {
		t.Fatal("Now() = nil on a machine with /proc")
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	os.WriteFile(filepath.Join(root, "proc", "loadavg"), []byte("1 2 3 4/5 6\n"), 0o644)
	if la, err := Read(root); err != nil || la.Slice()[2] != 3 {
		t.Fatalf("Read(root) = %+v, %v", la, err)
	}
	if _, err := Read(t.TempDir()); err == nil {
		t.Fatal("Read of a root without proc succeeded")
	}
}
