package hostkey

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/internal/tools"

	"github.com/goccy/go-yaml"
	"golang.org/x/crypto/ssh"
)

const seed = "6f1c2b9a0e7d4c3b2a19f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3"

func TestDeriveIsStableAndDistinct(t *testing.T) {
	a, err := Derive(seed, "dev", "node-0")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Derive(seed, "dev", "node-0")
	if a != again {
		t.Fatal("same seed, stack and node must give the same key")
	}
	seen := map[string]string{a.Public: "dev/node-0"}
	other := strings.Repeat("11", 32)
	for _, c := range [][3]string{{seed, "dev", "node-1"}, {seed, "prod", "node-0"}, {other, "dev", "node-0"}, {seed, "devn", "ode-0"}} {
		k, err := Derive(c[0], c[1], c[2])
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[k.Public]; dup {
			t.Fatalf("%v shares a key with %s", c, prev)
		}
		seen[k.Public] = c[1] + "/" + c[2]
	}
}

func TestPrivateMatchesPublic(t *testing.T) {
	k, err := Derive(seed, "dev", "node-0")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey([]byte(k.PrivatePEM))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); got != k.Public {
		t.Fatalf("private key's public half %s != %s", got, k.Public)
	}
	if !strings.HasPrefix(k.Public, "ssh-ed25519 ") {
		t.Fatal(k.Public)
	}
	// OpenSSH itself (what sshd uses to load host keys) reads the private key.
	keygen := tools.Require(t, "ssh-keygen")
	f := filepath.Join(t.TempDir(), "ssh_host_ed25519_key")
	if err := os.WriteFile(f, []byte(k.PrivatePEM), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(keygen, "-y", "-f", f).Output()
	if err != nil {
		t.Fatalf("ssh-keygen -y: %v", err)
	}
	if got := strings.Join(strings.Fields(string(out))[:2], " "); got != k.Public {
		t.Fatalf("ssh-keygen says %s, want %s", got, k.Public)
	}
}

func TestBadSeeds(t *testing.T) {
	for _, s := range []string{"", "not hex", strings.Repeat("ab", 31)} {
		if _, err := Derive(s, "dev", "node-0"); !errors.Is(err, ErrBadSeed) {
			t.Errorf("%q: want ErrBadSeed, got %v", s, err)
		}
	}
	s, err := NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Derive(s, "dev", "node-0"); err != nil {
		t.Fatalf("NewSeed gave an unusable seed: %v", err)
	}
}

func TestCloudInitCarriesTheKey(t *testing.T) {
	k, _ := Derive(seed, "dev", "node-0")
	ud := k.CloudInit()
	if !strings.HasPrefix(ud, "#cloud-config\n") {
		t.Fatal("cloud-init needs the #cloud-config header")
	}
	var doc struct {
		DeleteKeys bool     `yaml:"ssh_deletekeys"`
		GenTypes   []string `yaml:"ssh_genkeytypes"`
		Keys       struct {
			Private string `yaml:"ed25519_private"`
			Public  string `yaml:"ed25519_public"`
		} `yaml:"ssh_keys"`
	}
	if err := yaml.Unmarshal([]byte(ud), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.DeleteKeys || len(doc.GenTypes) != 0 || doc.Keys.Private != k.PrivatePEM || doc.Keys.Public != k.Public {
		t.Fatalf("cloud-config does not round-trip: %+v", doc)
	}
}
