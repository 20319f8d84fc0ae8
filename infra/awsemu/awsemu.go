// Package awsemu runs moto's server mode, a local AWS emulator, for tests of the rig's AWS SDK
// code (cloud-side gc, preflight): each test gets its own moto_server on a free loopback port,
// stopped when the test ends, and aws.Config values that point the SDK's own clients at it.
//
// moto is installed by .ci/moto into a venv (RIG_MOTO_VENV, default ~/.cache/rig/moto). A test
// skips only when python3 is absent; with python3 present and moto not installed it fails,
// naming the script, so that CI cannot pass without running it. What the pinned moto answers
// and what it does not is in docs/infra.md.
package awsemu

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/tools"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Account is the account moto puts every resource in (its default).
const Account = "123456789012"

// Options tune Start.
type Options struct {
	// Users are IAM users created before moto starts enforcing IAM, each with one inline policy
	// allowing exactly its actions (e.g. "ec2:Describe*"). With any user, every request after
	// their creation is checked against the signer's policies, as AWS does; without, moto
	// accepts any credentials.
	Users map[string][]string
}

// Server is one running moto_server behind a loopback proxy.
type Server struct {
	// URL is the endpoint every service is reached at (moto routes by the request's signing
	// service and target).
	URL   string
	moto  string // moto_server's own address
	users map[string]aws.Credentials

	mu    sync.Mutex
	stale []staleMapping
}

type staleMapping struct {
	ResourceARN string
	Tags        []struct{ Key, Value string }
}

// VenvDir is where .ci/moto installs moto.
func VenvDir() string {
	if d := os.Getenv("RIG_MOTO_VENV"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "rig", "moto")
}

// Start runs moto_server for the test and stops it (SIGTERM, then SIGKILL after 5 s) when the
// test ends. It skips the test when python3 is not on PATH.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	tools.Require(t, "python3") // then .ci/moto makes moto's venv with it
	bin := filepath.Join(VenvDir(), "bin", "moto_server")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("moto is not installed (%v): run .ci/moto, which installs the pinned moto[server] into %s", err, VenvDir())
	}
	s := &Server{users: map[string]aws.Credentials{}}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		// Another process can take the port between its probe and moto's bind; then try again.
		if lastErr = s.launch(t, bin, o); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("start moto_server: %v", lastErr)
	}
	for name, actions := range o.Users {
		if err := s.createUser(name, actions); err != nil {
			t.Fatalf("create IAM user %s in moto: %v", name, err)
		}
	}
	proxy := httptest.NewServer(s.handler())
	t.Cleanup(proxy.Close)
	s.URL = proxy.URL
	return s
}

func (s *Server) launch(t testing.TB, bin string, o Options) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = os.Environ()
	if len(o.Users) > 0 {
		// Three unauthenticated IAM calls per user (CreateUser, PutUserPolicy, CreateAccessKey);
		// every request after them is authenticated and authorised.
		cmd.Env = append(cmd.Env, "INITIAL_NO_AUTH_ACTION_COUNT="+strconv.Itoa(3*len(o.Users)))
	}
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	s.moto = "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("moto_server exited (%v): %s", err, tail(log.String()))
		default:
		}
		if resp, err := http.Get(s.moto + "/moto-api/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("moto_server did not answer on %s within 60 s: %s", s.moto, tail(log.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("moto_server log (tail):\n%s", tail(log.String()))
		}
	})
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Config is an SDK configuration for region that reaches the emulator with credentials moto
// accepts when it does not enforce IAM.
func (s *Server) Config(region string) aws.Config {
	return s.config(region, aws.Credentials{AccessKeyID: "AKIDRIGTEST", SecretAccessKey: "secret"})
}

// ConfigAs is Config signed as one of Options.Users.
func (s *Server) ConfigAs(user, region string) aws.Config {
	c, ok := s.users[user]
	if !ok {
		panic("awsemu: no user " + user)
	}
	return s.config(region, c)
}

func (s *Server) config(region string, c aws.Credentials) aws.Config {
	return aws.Config{
		Region:       region,
		Credentials:  credentials.StaticCredentialsProvider{Value: c},
		BaseEndpoint: aws.String(s.URL),
		// An emulator answers at once; retries would only hide its errors.
		Retryer: func() aws.Retryer { return aws.NopRetryer{} },
	}
}

// AddStaleARN makes the tagging API list a resource that does not exist, with these tags, as
// AWS's tagging index does for a while after a resource is deleted. moto's index is its live
// state, so this is the one answer the emulator is given: the proxy appends the mapping to the
// first page of every GetResources.
func (s *Server) AddStaleARN(arn string, tags map[string]string) {
	m := staleMapping{ResourceARN: arn}
	for k, v := range tags {
		m.Tags = append(m.Tags, struct{ Key, Value string }{k, v})
	}
	s.mu.Lock()
	s.stale = append(s.stale, m)
	s.mu.Unlock()
}

func (s *Server) handler() http.Handler {
	target, _ := url.Parse(s.moto)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Header.Get("X-Amz-Target") != "ResourceGroupsTaggingAPI_20170126.GetResources" ||
			resp.StatusCode != http.StatusOK || resp.Request.Header.Get("X-Rig-First-Page") != "1" {
			return nil
		}
		s.mu.Lock()
		stale := append([]staleMapping(nil), s.stale...)
		s.mu.Unlock()
		if len(stale) == 0 {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(body, &page); err != nil {
			return fmt.Errorf("awsemu: GetResources answer: %w", err)
		}
		var list []json.RawMessage
		_ = json.Unmarshal(page["ResourceTagMappingList"], &list)
		for _, m := range stale {
			b, _ := json.Marshal(m)
			list = append(list, b)
		}
		page["ResourceTagMappingList"], _ = json.Marshal(list)
		body, _ = json.Marshal(page)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "ResourceGroupsTaggingAPI_20170126.GetResources" {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var in struct{ PaginationToken string }
			if json.Unmarshal(b, &in) == nil && in.PaginationToken == "" {
				r.Header.Set("X-Rig-First-Page", "1")
			}
		}
		rp.ServeHTTP(w, r)
	})
}

// createUser runs the IAM Query API against moto directly (no SDK client for IAM is linked):
// CreateUser, PutUserPolicy with an Allow of the actions, CreateAccessKey.
func (s *Server) createUser(name string, actions []string) error {
	policy, _ := json.Marshal(map[string]any{"Version": "2012-10-17",
		"Statement": []map[string]any{{"Effect": "Allow", "Action": actions, "Resource": "*"}}})
	calls := []url.Values{
		{"Action": {"CreateUser"}, "UserName": {name}},
		{"Action": {"PutUserPolicy"}, "UserName": {name}, "PolicyName": {"rig-test"}, "PolicyDocument": {string(policy)}},
		{"Action": {"CreateAccessKey"}, "UserName": {name}},
	}
	var key struct {
		ID     string `xml:"CreateAccessKeyResult>AccessKey>AccessKeyId"`
		Secret string `xml:"CreateAccessKeyResult>AccessKey>SecretAccessKey"`
	}
	for _, v := range calls {
		v.Set("Version", "2010-05-08")
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.moto+"/", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		// moto routes by the signing service in the Authorization header.
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDRIGTEST/20250101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d: %s", v.Get("Action"), resp.StatusCode, tail(string(body)))
		}
		if v.Get("Action") == "CreateAccessKey" {
			if err := xml.Unmarshal(body, &key); err != nil || key.ID == "" {
				return errors.Join(fmt.Errorf("CreateAccessKey answer: %s", tail(string(body))), err)
			}
		}
	}
	s.users[name] = aws.Credentials{AccessKeyID: key.ID, SecretAccessKey: key.Secret}
	return nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func tail(s string) string {
	const n = 2000
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
