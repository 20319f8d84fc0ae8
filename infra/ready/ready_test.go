package ready

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport"
	"github.com/rig-dev/rig/transport/sshx"
)

// These tests reach a real OpenSSH sshd (internal/sshdtest) through transport/sshx, as rig up
// does; the node's "boot-finished" file is a file in the test's folder.

// counting counts the checks made on each node.
type counting struct {
	transport.Transport
	mu    sync.Mutex
	execs map[string]int
}

func (c *counting) Exec(ctx context.Context, n inventory.Node, cmd transport.Cmd) (transport.Result, error) {
	c.mu.Lock()
	c.execs[n.Name]++
	c.mu.Unlock()
	return c.Transport.Exec(ctx, n, cmd)
}

func (c *counting) count(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.execs[node]
}

func newTransport(t *testing.T, srv *sshdtest.Server) *counting {
	t.Helper()
	tr, err := sshx.New(sshx.Options{KeyFiles: []string{srv.ClientKeyFile}, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return &counting{Transport: tr, execs: map[string]int{}}
}

// closedPort returns a port on host that nothing listens on (it was free a moment ago).
func closedPort(t *testing.T, host string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// lineWriter is a progress sink that signals when a line containing want has been written.
type lineWriter struct {
	mu   sync.Mutex
	b    bytes.Buffer
	want map[string]chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	for s, ch := range w.want {
		if strings.Contains(w.b.String(), s) {
			close(ch)
			delete(w.want, s)
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A node whose boot-finished file never appears keeps the wait going (it is checked again and
// again) until the timeout, and is then named with what it is waiting for; a node without
// sshd is named with the transport's answer.
func TestNodeWithoutBootFinishedIsNamedAtTheTimeout(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv)
	marker := filepath.Join(t.TempDir(), "boot-finished")
	booting := srv.Node("node-1")
	dead := srv.Node("client-0")
	dead.SSH.Port = closedPort(t, srv.Host)
	var out bytes.Buffer
	res, err := Wait(context.Background(), []inventory.Node{booting, dead}, Options{
		Transport: tr, Timeout: 2 * time.Second, Interval: 50 * time.Millisecond, Marker: marker, Out: &out,
		// Packages are looked for only once cloud-init has finished: a missing one is no failure yet.
		Packages: []Package{{Name: "fio", Command: "rig-test-no-such-fio"}},
	})
	var nr *NotReadyError
	if !errors.As(err, &nr) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a NotReadyError at the timeout, got %v\n%s", err, out.String())
	}
	if len(nr.Pending) != 2 || nr.Pending[0].Name != "node-1" || nr.Pending[0].State != Booting ||
		nr.Pending[1].Name != "client-0" || nr.Pending[1].State != NoSSH {
		t.Errorf("pending %+v, want node-1 booting and client-0 without ssh", nr.Pending)
	}
	msg := err.Error()
	for _, want := range []string{"2 node(s) not ready after 2s", "node-1 (ssh answers with its pinned host key; cloud-init has not finished (" + marker + " absent))",
		"client-0 (ssh d", "connection refused)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q: %s", want, msg)
		}
	}
	if n := tr.count("node-1"); n < 2 {
		t.Errorf("node-1 was checked %d time(s): the wait did not keep trying", n)
	}
	// One line per state change, not per try.
	if got := strings.Count(out.String(), "  node-1: ssh answers"); got != 1 {
		t.Errorf("node-1's state printed %d times, want once:\n%s", got, out.String())
	}
	if res[0].State != Booting || res[1].State != NoSSH {
		t.Errorf("result %+v", res)
	}
}

// Nodes that are booting are waited for, and pass as soon as cloud-init's file is there.
func TestReadyNodesPass(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv)
	marker := filepath.Join(t.TempDir(), "boot-finished")
	out := &lineWriter{want: map[string]chan struct{}{
		"  node-0: ssh answers with its pinned host key":   make(chan struct{}),
		"  client-0: ssh answers with its pinned host key": make(chan struct{}),
	}}
	waits := make([]chan struct{}, 0, 2)
	for _, ch := range out.want {
		waits = append(waits, ch)
	}
	client := srv.Node("client-0")
	client.Role = inventory.RoleClient
	type result struct {
		nodes []Node
		err   error
	}
	done := make(chan result, 1)
	go func() {
		res, err := Wait(context.Background(), []inventory.Node{srv.Node("node-0"), client}, Options{
			Transport: tr, Timeout: 5 * time.Minute, Interval: 50 * time.Millisecond, Marker: marker, Out: out,
		})
		done <- result{res, err}
	}()
	for _, ch := range waits {
		select {
		case <-ch:
		case r := <-done:
			t.Fatalf("the wait ended before cloud-init finished: %v\n%s", r.err, out.String())
		}
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, out.String())
	}
	for _, n := range r.nodes {
		if n.State != Ready {
			t.Errorf("%s: %v %s", n.Name, n.State, n.Detail)
		}
	}
	for _, want := range []string{"  node-0: ready after", "  client-0: ready after", "rig: all 2 node(s) ready after"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, out.String())
		}
	}
}

// A node presenting another host key than the pinned one is refused at once, however long the
// timeout, and never logged in to, though its cloud-init has finished; the node with the right
// key is not what the error names.
func TestWrongHostKeyIsRefused(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv)
	marker := filepath.Join(t.TempDir(), "boot-finished")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	impostor := srv.Node("node-1")
	impostor.SSH.HostKey = sshdtest.RandomHostKey(t)
	var out bytes.Buffer
	res, err := Wait(context.Background(), []inventory.Node{impostor}, Options{
		Transport: tr, Timeout: time.Hour, Interval: 50 * time.Millisecond, Marker: marker, Out: &out,
	})
	var re *RefusedError
	if !errors.As(err, &re) || re.Node != "node-1" || !errors.Is(err, transport.ErrHostKey) {
		t.Fatalf("want node-1 refused for its host key, got %v\n%s", err, out.String())
	}
	if res[0].State != Refused || !strings.Contains(err.Error(), "host key mismatch for node-1") {
		t.Errorf("result %+v, error %v", res, err)
	}
	if strings.Contains(srv.Log(), "Accepted publickey") {
		t.Errorf("the client logged in to a node whose host key is not the pinned one:\n%s", srv.Log())
	}

	// With a right node beside it, the wrong one still ends the wait, and only it is named.
	res, err = Wait(context.Background(), []inventory.Node{srv.Node("node-0"), impostor}, Options{
		Transport: tr, Timeout: time.Hour, Interval: 50 * time.Millisecond, Marker: marker,
	})
	if !errors.As(err, &re) || re.Node != "node-1" || strings.Contains(err.Error(), "node-0") {
		t.Fatalf("want only node-1 refused, got %v", err)
	}
	if res[1].State != Refused {
		t.Errorf("result %+v", res)
	}
}

// A login refused for every key offered is reported at once as well: waiting does not change
// the keys.
func TestRefusedLoginIsReportedAtOnce(t *testing.T) {
	srv := sshdtest.Start(t)
	other := sshdtest.Start(t) // its client key is not authorized on srv
	tr := newTransport(t, other)
	_, err := Wait(context.Background(), []inventory.Node{srv.Node("node-0")}, Options{
		Transport: tr, Timeout: time.Hour, Interval: 50 * time.Millisecond, Marker: "/",
	})
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, sshx.ErrAuth) || !strings.Contains(err.Error(), "rig:publicKey") {
		t.Fatalf("want node-0 refused for authentication, got %v", err)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	if _, err := Wait(context.Background(), nil, Options{}); err == nil || !strings.Contains(err.Error(), "no transport") {
		t.Errorf("no transport: %v", err)
	}
	if _, err := Wait(context.Background(), nil, Options{Transport: &counting{}}); err == nil || !strings.Contains(err.Error(), "timeout 0s") {
		t.Errorf("no timeout: %v", err)
	}
}

// A node on which cloud-init has finished without a package of its package step fails at once,
// naming the package and cloud-init's package step, instead of passing as ready and leaving a
// later disk check to find fio missing; a node with every package passes.
func TestMissingPackageFailsAtOnce(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv)
	marker := filepath.Join(t.TempDir(), "boot-finished")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	present := []Package{{Name: "coreutils", Command: "sh"}}
	if _, err := Wait(context.Background(), []inventory.Node{srv.Node("node-0")}, Options{
		Transport: tr, Timeout: time.Minute, Interval: 50 * time.Millisecond, Marker: marker, Packages: present,
	}); err != nil {
		t.Fatalf("every package present: %v", err)
	}
	var out bytes.Buffer
	start := time.Now()
	res, err := Wait(context.Background(), []inventory.Node{srv.Node("node-0")}, Options{
		Transport: tr, Timeout: 5 * time.Minute, Interval: 50 * time.Millisecond, Marker: marker, Out: &out,
		Packages: append(present, Package{Name: "fio", Command: "rig-test-no-such-fio"}, Package{Name: "sysstat", Command: "rig-test-no-such-iostat"}),
	})
	var pe *PackageError
	if !errors.As(err, &pe) {
		t.Fatalf("want a PackageError, got %v\n%s", err, out.String())
	}
	if time.Since(start) > time.Minute {
		t.Errorf("the wait went on after cloud-init had finished without the packages")
	}
	if pe.Node != "node-0" || strings.Join(pe.Missing, ",") != "fio,sysstat" || res[0].State != Incomplete {
		t.Errorf("error %+v, state %v", pe, res[0].State)
	}
	for _, want := range []string{"node-0: cloud-init finished", "package step (package_update, packages: fio, sysstat) did not install fio, sysstat",
		"/var/log/cloud-init-output.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
