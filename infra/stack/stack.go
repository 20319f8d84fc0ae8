// Package stack is the light side of the rig's Pulumi stacks: which backend they live in, the
// target that reads a stack's inventory with the pulumi CLI, and the launcher of the stack driver.
//
// The driver itself (infra/automation: up, down, status, gc through the Pulumi Automation API) is a
// separate program, rig-stack, built from infra/stackctl on first use. The Automation API pulls
// in gRPC, protobuf, go-git and OpenTelemetry, which more than doubles the packages of the rig
// binary; keeping it out keeps `go build ./cmd/rig` (the quickstart) fast, while `rig up` needs
// the Go toolchain anyway, because Pulumi builds the program in infra/ with it.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/inventory"
)

// Errors callers act on.
var (
	// ErrNoPulumi means the pulumi CLI is not installed (or not on PATH).
	ErrNoPulumi = errors.New("the pulumi CLI was not found on PATH: install it with " +
		"`curl -fsSL https://get.pulumi.com | sh` (or see https://www.pulumi.com/docs/iac/download-install/), " +
		"open a new shell so that `pulumi version` works, and run this again; nothing was created")
	// ErrNoStack means the backend has no such stack.
	ErrNoStack = errors.New("no such stack")
	// ErrNoInventory means the stack has no inventory output (never deployed, or destroyed).
	ErrNoInventory = errors.New("stack has no inventory output")
)

// FindPulumi returns the path of the pulumi CLI, or ErrNoPulumi.
func FindPulumi() (string, error) {
	p, err := exec.LookPath("pulumi")
	if err != nil {
		return "", ErrNoPulumi
	}
	return p, nil
}

// Backend is where the stacks live and the environment the pulumi CLI needs to reach them.
type Backend struct {
	Env      map[string]string // to add to the CLI's environment
	Own      bool              // rig chose its local file backend
	StateDir string            // the local backend's folder when Own
}

// ChooseBackend keeps the backend the user chose for rig (--backend, passed in extraEnv, or
// PULUMI_BACKEND_URL) and otherwise picks a local file backend in stateDir ("" means
// $XDG_STATE_HOME/rig/pulumi, or ~/.local/state/rig/pulumi), so that trying the rig needs no
// Pulumi Cloud account. Stack secrets of the local backend are encrypted with a passphrase file
// next to it unless PULUMI_CONFIG_PASSPHRASE(_FILE) is set. A `pulumi login` recorded in
// ~/.pulumi/credentials.json never chooses: a login made for another project would silently move
// rig's stacks (and hide the ones already in the local backend); --backend https://api.pulumi.com
// uses it on purpose. It creates nothing.
func ChooseBackend(stateDir string, extraEnv map[string]string) (Backend, error) {
	b := Backend{Env: map[string]string{"PULUMI_SKIP_UPDATE_CHECK": "true"}}
	for k, v := range extraEnv {
		if v != "" {
			b.Env[k] = v
		}
	}
	if os.Getenv("PULUMI_BACKEND_URL") != "" || extraEnv["PULUMI_BACKEND_URL"] != "" {
		return b, nil
	}
	if stateDir == "" {
		base, err := StateDir()
		if err != nil {
			return Backend{}, fmt.Errorf("choose a local Pulumi backend: %w (set PULUMI_BACKEND_URL)", err)
		}
		stateDir = filepath.Join(base, "pulumi")
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return Backend{}, err
	}
	b.Own, b.StateDir = true, abs
	b.Env["PULUMI_BACKEND_URL"] = "file://" + filepath.ToSlash(abs)
	if os.Getenv("PULUMI_CONFIG_PASSPHRASE") == "" && os.Getenv("PULUMI_CONFIG_PASSPHRASE_FILE") == "" &&
		extraEnv["PULUMI_CONFIG_PASSPHRASE"] == "" && extraEnv["PULUMI_CONFIG_PASSPHRASE_FILE"] == "" {
		b.Env["PULUMI_CONFIG_PASSPHRASE_FILE"] = filepath.Join(abs, "passphrase")
	}
	return b, nil
}

// StateDir is the folder of rig's state on this machine: $XDG_STATE_HOME/rig, or
// ~/.local/state/rig. It holds the local Pulumi backend (pulumi/) and the stacks' pinned
// known_hosts files (ssh/). It creates nothing.
func StateDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "rig"), nil
}

// LoggedIn reports whether `pulumi login` chose a backend: the CLI records it in the "current"
// field of $PULUMI_HOME/credentials.json, the only field read here. rig only mentions it.
func LoggedIn() bool {
	home := os.Getenv("PULUMI_HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return false
		}
		home = filepath.Join(h, ".pulumi")
	}
	b, err := untrusted.ReadFile(filepath.Join(home, "credentials.json"), "pulumi credentials file") // never a FIFO (PULUMI_HOME is the user's)
	if err != nil {
		return false
	}
	var c struct {
		Current string `json:"current"`
	}
	return json.Unmarshal(b, &c) == nil && c.Current != ""
}

// URL is the backend's URL, or "" for the one `pulumi login` chose.
func (b Backend) URL() string {
	if v := b.Env["PULUMI_BACKEND_URL"]; v != "" {
		return v
	}
	return os.Getenv("PULUMI_BACKEND_URL")
}

// Where says in one line where the stacks' state lives and what losing it would mean. secrets is
// the stack's secrets provider ("" when unknown or the passphrase default).
func (b Backend) Where(secrets string) string {
	u := b.URL()
	switch {
	case b.Own:
		s := fmt.Sprintf("state: %s, on this machine only (passphrase file %s): losing either leaves the cluster "+
			"running with nothing but `rig gc` from the cloud side to remove it; --backend s3://BUCKET/PREFIX keeps it elsewhere", u, b.Env["PULUMI_CONFIG_PASSPHRASE_FILE"])
		if LoggedIn() {
			s += " (your `pulumi login` is not used: pass --backend or set PULUMI_BACKEND_URL for that)"
		}
		return s
	case strings.HasPrefix(u, "file://"):
		return fmt.Sprintf("state: %s (a folder; losing it leaves the cluster running, removable only by `rig gc` from the cloud side)", u)
	}
	where := u
	if where == "" {
		where = "the backend of `pulumi login`"
	}
	switch {
	case strings.HasPrefix(secrets, "awskms://"), strings.HasPrefix(secrets, "azurekeyvault://"), strings.HasPrefix(secrets, "gcpkms://"),
		strings.HasPrefix(secrets, "hashivault://"):
		return fmt.Sprintf("state: %s, secrets encrypted with %s: any machine with access to both can manage the stack; losing the key makes its secrets unreadable", where, secrets)
	case secrets == "" || secrets == "passphrase":
		return fmt.Sprintf("state: %s, secrets encrypted with a passphrase (PULUMI_CONFIG_PASSPHRASE[_FILE]): keep the passphrase, without it the stack's secrets cannot be read", where)
	}
	return fmt.Sprintf("state: %s, secrets provider %s", where, secrets)
}

// String describes the backend for messages.
func (b Backend) String() string {
	if b.Own {
		return b.Env["PULUMI_BACKEND_URL"] + " (rig's local file backend; set PULUMI_BACKEND_URL to use another)"
	}
	if v := b.Env["PULUMI_BACKEND_URL"]; v != "" {
		return v
	}
	if v := os.Getenv("PULUMI_BACKEND_URL"); v != "" {
		return v
	}
	return "the backend of `pulumi login`"
}

// Exists is false when rig's own local backend was never created, i.e. holds no stacks.
func (b Backend) Exists() bool {
	if !b.Own {
		return true
	}
	_, err := os.Stat(b.StateDir)
	return err == nil
}

// Prepare creates rig's local backend folder and its passphrase file, once, before the first
// operation that writes state; it tells out about a passphrase file it creates.
func (b Backend) Prepare(out io.Writer) error {
	if !b.Own {
		return nil
	}
	if err := os.MkdirAll(b.StateDir, 0o700); err != nil {
		return fmt.Errorf("create local Pulumi backend %s: %w", b.StateDir, err)
	}
	pf, ok := b.Env["PULUMI_CONFIG_PASSPHRASE_FILE"]
	if !ok {
		return nil
	}
	if _, err := os.Stat(pf); err == nil {
		return nil
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	if err := os.WriteFile(pf, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write stack secrets passphrase: %w", err)
	}
	fmt.Fprintf(out, "rig: created %s: it encrypts the stacks' secrets; keep it (plain pulumi needs PULUMI_BACKEND_URL=%s PULUMI_CONFIG_PASSPHRASE_FILE=%s)\n",
		pf, b.Env["PULUMI_BACKEND_URL"], pf)
	return nil
}

// EnvList returns os.Environ() with the backend's variables added.
func (b Backend) EnvList() []string {
	env := os.Environ()
	for k, v := range b.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// DecodeInventory turns the value of a stack's inventory output into an inventory and checks it.
func DecodeInventory(stackName string, value any) (*inventory.Inventory, error) {
	if value == nil {
		return nil, fmt.Errorf("%w: %s (run rig up --stack %s)", ErrNoInventory, stackName, stackName)
	}
	b, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	var inv inventory.Inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("decode inventory of %s: %w", stackName, err)
	}
	if err := inv.Validate(); err != nil {
		return nil, fmt.Errorf("inventory of %s: %w", stackName, err)
	}
	return &inv, nil
}

// outputsCommand runs `pulumi stack output --json` for a stack.
func outputsCommand(ctx context.Context, pulumi, projectDir, stackName string, b Backend) (map[string]any, error) {
	cmd := exec.CommandContext(ctx, pulumi, "stack", "output", "--json", "--stack", stackName)
	cmd.Dir = projectDir
	cmd.Env = b.EnvList()
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if noStackRE.Match(stderr.b) {
			return nil, fmt.Errorf("%w: %s in %s", ErrNoStack, stackName, b)
		}
		return nil, fmt.Errorf("pulumi stack output --stack %s: %w: %s", stackName, err, stderr.b)
	}
	var outs map[string]any
	if err := json.Unmarshal(out, &outs); err != nil {
		return nil, fmt.Errorf("parse outputs of %s: %w", stackName, err)
	}
	return outs, nil
}

var noStackRE = regexp.MustCompile(`no stack named.*found`)

// limitedBuffer keeps the first 64 KiB written to it, for error messages.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
