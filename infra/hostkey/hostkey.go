// Package hostkey derives the nodes' SSH host keys from one secret seed, so that the rig knows
// every host key before the first connection (no trust on first use) and a repeated `pulumi up`
// yields the same keys without keeping per-node private keys anywhere but the stack's secrets.
package hostkey

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
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
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return Key{}, fmt.Errorf("public host key for %s: %w", node, err)
	}
	return Key{
		PrivatePEM: string(pem.EncodeToMemory(marshalOpenSSH(priv, pub))),
		Public:     strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))),
	}, nil
}

// marshalOpenSSH encodes an unencrypted ed25519 key in the openssh-key-v1 format. Unlike
// ssh.MarshalPrivateKey it uses a check value derived from the key instead of a random one, so
// the same key always yields the same bytes: the user data, and with it the instance, then stays
// unchanged from one `pulumi up` to the next.
func marshalOpenSSH(priv ed25519.PrivateKey, pub ssh.PublicKey) *pem.Block {
	sum := sha256.Sum256(priv.Seed())
	check := binary.BigEndian.Uint32(sum[:4])
	str := func(b []byte) []byte {
		out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
		return append(out, b...)
	}
	var inner []byte
	inner = binary.BigEndian.AppendUint32(inner, check)
	inner = binary.BigEndian.AppendUint32(inner, check)
	inner = append(inner, str([]byte(ssh.KeyAlgoED25519))...)
	inner = append(inner, str(priv.Public().(ed25519.PublicKey))...)
	inner = append(inner, str(priv)...) // seed || public key, as OpenSSH stores it
	inner = append(inner, str(nil)...)  // comment
	for i := byte(1); len(inner)%8 != 0; i++ {
		inner = append(inner, i)
	}
	var out []byte
	out = append(out, "openssh-key-v1\x00"...)
	out = append(out, str([]byte("none"))...) // cipher
	out = append(out, str([]byte("none"))...) // kdf
	out = append(out, str(nil)...)            // kdf options
	out = binary.BigEndian.AppendUint32(out, 1)
	out = append(out, str(pub.Marshal())...)
	out = append(out, str(inner)...)
	return &pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: out}
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
