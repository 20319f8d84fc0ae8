// Package hostkey derives the nodes' SSH host keys from one secret seed, so that the rig knows
// every host key before the first connection (no trust on first use) and a repeated `pulumi up`
// yields the same keys without keeping per-node private keys anywhere but the stack's secrets.
package hostkey

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// MinSeedBytes is the least entropy a seed must carry.
const MinSeedBytes = 32

// ErrBadSeed means the seed is missing, not hex, or too short.
var ErrBadSeed = errors.New("host key seed must be at least 32 bytes of hex (e.g. openssl rand -hex 32)")

// Key is one node's host key.
type Key struct {
	PrivatePEM string // OpenSSH private key, for /etc/ssh/ssh_host_ed25519_key
	Public     string // authorized_keys form without comment: "ssh-ed25519 AAAA..."
}

// NewSeed returns a fresh random seed in the form Derive accepts.
func NewSeed() (string, error) {
	b := make([]byte, MinSeedBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate host key seed: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Derive returns the ed25519 host key of one node. Different stacks or nodes never share a key.
func Derive(seedHex, stack, node string) (Key, error) {
	seed, err := hex.DecodeString(strings.TrimSpace(seedHex))
	if err != nil || len(seed) < MinSeedBytes {
		return Key{}, ErrBadSeed
	}
	material, err := hkdf.Key(sha256.New, seed, []byte("rig ssh host key v1"), stack+"\x00"+node, ed25519.SeedSize)
	if err != nil {
		return Key{}, fmt.Errorf("derive host key for %s: %w", node, err)
	}
	priv := ed25519.NewKeyFromSeed(material)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return Key{}, fmt.Errorf("marshal host key for %s: %w", node, err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return Key{}, fmt.Errorf("public host key for %s: %w", node, err)
	}
	return Key{
		PrivatePEM: string(pem.EncodeToMemory(block)),
		Public:     strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))),
	}, nil
}

// CloudInit returns the cloud-config user data that installs the key as the node's only host
// key: cloud-init deletes the image's keys, generates none and writes this one before sshd starts.
func (k Key) CloudInit() string {
	var b strings.Builder
	b.WriteString("#cloud-config\n")
	b.WriteString("ssh_deletekeys: true\n")
	b.WriteString("ssh_genkeytypes: []\n")
	b.WriteString("ssh_keys:\n")
	b.WriteString("  ed25519_private: |\n")
	for _, line := range strings.Split(strings.TrimRight(k.PrivatePEM, "\n"), "\n") {
		b.WriteString("    ")
		b.WriteString(line)
		b.WriteString("\n")
	}
	b.WriteString("  ed25519_public: ")
	b.WriteString(k.Public)
	b.WriteString("\n")
	return b.String()
}
