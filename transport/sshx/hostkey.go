package sshx

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyError says a node could not prove its identity: it presented a key that is not on
// record, has no key of a recorded type, or no key is on record at all. It matches
// transport.ErrHostKey (and so transport.ErrUnreachable) with errors.Is.
type HostKeyError struct {
	Node      string   // inventory name
	Addr      string   // host:port dialled
	Presented string   // "ssh-ed25519 SHA256:…" of the key the server showed; "" if none
	OnRecord  []string // the same for every key on record
	Reason    string   // what went wrong, in words
}

func (e *HostKeyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "host key mismatch for %s (%s): %s", e.Node, e.Addr, e.Reason)
	if e.Presented != "" {
		fmt.Fprintf(&b, "; server presented %s", e.Presented)
	}
	if len(e.OnRecord) > 0 {
		fmt.Fprintf(&b, "; on record: %s", strings.Join(e.OnRecord, ", "))
	}
	b.WriteString("; refusing to connect")
	return b.String()
}

// Unwrap classifies the error as transport.ErrHostKey.
func (e *HostKeyError) Unwrap() error { return transport.ErrHostKey }

func describeKey(k ssh.PublicKey) string {
	return k.Type() + " " + ssh.FingerprintSHA256(k)
}

// hostKeyCheck is what a connection to one node needs to verify the server.
type hostKeyCheck struct {
	callback   ssh.HostKeyCallback
	algorithms []string
}

// ParseHostKeys parses the inventory's ssh.host_key field: one or more keys in authorized_keys
// format ("ssh-ed25519 AAAA… comment"), one per line.
func ParseHostKeys(s string) ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	rest := []byte(s)
	for len(bytes.TrimSpace(rest)) > 0 {
		k, _, _, r, err := ssh.ParseAuthorizedKey(rest)
		if err != nil {
			return nil, fmt.Errorf("parse host key %q: %w (want authorized_keys format, e.g. \"ssh-ed25519 AAAA…\")", firstLine(string(rest)), err)
		}
		keys = append(keys, k)
		rest = r
	}
	if len(keys) == 0 {
		return nil, errors.New("host key is empty")
	}
	return keys, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// hostKeyAlgorithms lists the signature algorithms that can prove possession of the given keys.
// Offering only these keeps the server from choosing a key type we hold no record of, which
// x/crypto's knownhosts would otherwise report as a (spurious) mismatch.
func hostKeyAlgorithms(keys []ssh.PublicKey) []string {
	var out []string
	add := func(a ...string) {
		for _, x := range a {
			if !containsString(out, x) {
				out = append(out, x)
			}
		}
	}
	for _, k := range keys {
		switch k.Type() {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			add(k.Type())
		}
	}
	return out
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// pinnedCheck verifies against keys from the inventory.
func pinnedCheck(node, addr string, keys []ssh.PublicKey) hostKeyCheck {
	var record []string
	for _, k := range keys {
		record = append(record, describeKey(k))
	}
	cb := func(_ string, _ net.Addr, key ssh.PublicKey) error {
		for _, k := range keys {
			if bytes.Equal(k.Marshal(), key.Marshal()) {
				return nil
			}
		}
		return &HostKeyError{Node: node, Addr: addr, Presented: describeKey(key), OnRecord: record,
			Reason: "the server's key is not the one in the inventory"}
	}
	return hostKeyCheck{callback: cb, algorithms: hostKeyAlgorithms(keys)}
}

// probeKey is a key no server holds; checking it against known_hosts returns the keys on record.
var probeKey = func() ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return k
}()

func tcpAddr(addr string) net.Addr {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return &net.TCPAddr{IP: net.ParseIP(host), Port: p}
}

// knownHostsCheck verifies against known_hosts files, restricted to the key types on record for
// this address.
func knownHostsCheck(kh ssh.HostKeyCallback, files []string, node, addr string) (hostKeyCheck, error) {
	var ke *knownhosts.KeyError
	err := kh(addr, tcpAddr(addr), probeKey)
	if err == nil || !errors.As(err, &ke) {
		return hostKeyCheck{}, fmt.Errorf("look up %s in %s: %v", addr, strings.Join(files, ", "), err)
	}
	if len(ke.Want) == 0 {
		return hostKeyCheck{}, &HostKeyError{Node: node, Addr: addr,
			Reason: fmt.Sprintf("no host key on record in %s (put the node's key in the inventory's ssh.host_key or the known_hosts file)", strings.Join(files, ", "))}
	}
	var keys []ssh.PublicKey
	var record []string
	for _, w := range ke.Want {
		keys = append(keys, w.Key)
		record = append(record, fmt.Sprintf("%s (%s:%d)", describeKey(w.Key), w.Filename, w.Line))
	}
	cb := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := kh(hostname, remote, key)
		if err == nil {
			return nil
		}
		var re *knownhosts.RevokedError
		if errors.As(err, &re) {
			return &HostKeyError{Node: node, Addr: addr, Presented: describeKey(key), Reason: "the server's key is marked @revoked in " + re.Revoked.Filename}
		}
		return &HostKeyError{Node: node, Addr: addr, Presented: describeKey(key), OnRecord: record,
			Reason: "the server's key is not the one in known_hosts"}
	}
	return hostKeyCheck{callback: cb, algorithms: hostKeyAlgorithms(keys)}, nil
}

// checkFor picks how to verify node: the inventory's pinned key wins; otherwise known_hosts.
func (t *Transport) checkFor(node inventory.Node, addr string) (hostKeyCheck, error) {
	if node.SSH != nil && strings.TrimSpace(node.SSH.HostKey) != "" {
		keys, err := ParseHostKeys(node.SSH.HostKey)
		if err != nil {
			return hostKeyCheck{}, fmt.Errorf("node %s: ssh.host_key: %w", node.Name, err)
		}
		return pinnedCheck(node.Name, addr, keys), nil
	}
	if t.knownHosts != nil {
		return knownHostsCheck(t.knownHosts, t.opts.KnownHosts, node.Name, addr)
	}
	return hostKeyCheck{}, &HostKeyError{Node: node.Name, Addr: addr,
		Reason: "no host key on record (the inventory has no ssh.host_key and no known_hosts file was given)"}
}

// hostKeyFromHandshake turns x/crypto's "no common algorithm for host key" into a HostKeyError:
// the server has no key of any type on record, which is as much a mismatch as a wrong key.
func hostKeyFromHandshake(err error, node, addr string, algos []string) error {
	if err != nil && strings.Contains(err.Error(), "no common algorithm for host key") {
		return &HostKeyError{Node: node, Addr: addr,
			Reason: fmt.Sprintf("the server offers no host key of a type on record (%s): %v", strings.Join(algos, ", "), err)}
	}
	return nil
}
