package rundir

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNewEngineBuild: the binary is hashed when it is a file here; the reference engine takes the
// rig's version and commit unless labelled otherwise; another engine has only what it is told.
func TestNewEngineBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "engine")
	os.WriteFile(bin, []byte("abc"), 0o755)
	rig := BuildInfo{Version: "v1.2.3", Commit: "deadbeef"}
	e := NewEngineBuild("reference", bin, "", "", rig, true)
	if e.SHA256 != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || e.Version != "v1.2.3" || e.Commit != "deadbeef" {
		t.Errorf("reference: %+v", e)
	}
	if e := NewEngineBuild("reference", bin, "v7", "cafe", rig, true); e.Version != "v7" || e.Commit != "cafe" {
		t.Errorf("labelled: %+v", e)
	}
	if e := NewEngineBuild("command", "java", "", "", rig, false); e.SHA256 != "" || e.Version != "" || e.Commit != "" || e.Binary != "java" {
		t.Errorf("command engine off this machine: %+v", e)
	}
}
