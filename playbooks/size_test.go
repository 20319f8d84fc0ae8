package playbooks

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A playbook over 1 MiB is refused at once, before the YAML parser sees it (a 50 MB one used
// to take most of a minute and 1.6 GB); from a file, before it is even read.
func TestOversizedPlaybookRefusedBeforeParsing(t *testing.T) {
	// The unknown key is a problem only a parse would find: refused before parsing, the size is
	// the one problem.
	big := base + "no_such_key: 1\ndescription: " + string(bytes.Repeat([]byte("x"), MaxSize)) + "\n"
	probs := problemsOf(t, big)
	wantProblem(t, probs, "t.yaml:1:1", "at most 1048576 (1 MiB)")
	if len(probs) != 1 {
		t.Errorf("%d problems, want the size alone (the YAML was parsed): %v", len(probs), probs)
	}

	p := filepath.Join(t.TempDir(), "big.yaml")
	f, _ := os.Create(p)
	f.Truncate(50 << 20) // sparse: 50 MB of zeros
	f.Close()
	_, err := Open(p, testDrivers)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("52428800 bytes")) {
		t.Fatalf("Open of a 50 MB file: %v", err)
	}
	// Exactly at the limit is still parsed.
	edge := base + "description: " + string(bytes.Repeat([]byte("x"), MaxSize-len(base)-len("description: \n"))) + "\n"
	if len(edge) != MaxSize {
		t.Fatalf("edge case is %d bytes", len(edge))
	}
	mustParse(t, edge)
}

// A UTF-8 byte-order mark before the first key is skipped, not read as part of the key.
func TestByteOrderMarkAccepted(t *testing.T) {
	p := mustParse(t, "\xEF\xBB\xBF"+base)
	if p.Name != "t" {
		t.Fatalf("name %q", p.Name)
	}
	// A problem after the mark still has the right line and column.
	wantProblem(t, problemsOf(t, "\xEF\xBB\xBF"+base+"warmup: soon\n"), "t.yaml:5:9", "warmup")
}

// Names follow the one grammar of names that become paths (inventory.NameGrammar).
func TestPlaybookNameGrammar(t *testing.T) {
	for _, bad := range []string{"../x", "a/b", "-rf", ".hidden", "x y"} {
		wantProblem(t, problemsOf(t, "name: '"+bad+"'\ncluster: {servers: 3, clients: 1}\nload: {probe_rate: 1000/s}\nduration: 30s\n"), "t.yaml:1:7", "not a name")
	}
}
