package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ErrNoGo means the stack driver cannot be built because the Go toolchain is missing.
var ErrNoGo = errors.New("the stack driver (rig-stack) is built from ./infra/stackctl with the Go toolchain, " +
	"which Pulumi also needs to build ./infra: install Go, or set RIG_STACK_DRIVER to a prebuilt " +
	"rig-stack (go build -o rig-stack ./infra/stackctl)")

// DriverOptions say how to find and run rig-stack.
type DriverOptions struct {
	ProjectDir string // the repository root (Pulumi.yaml, infra/stackctl)
	Stdin      io.Reader
	Stdout     io.Writer
	Stderr     io.Writer
	// Binary is a prebuilt rig-stack; "" means $RIG_STACK_DRIVER, else build it into CacheDir.
	Binary   string
	CacheDir string // "" means os.UserCacheDir()/rig
	// StopWait is how long the driver has, once interrupted, to stop before it is killed: an
	// update must be let finish its step (0 means DefaultStopWait), a read-only verb such as
	// preflight need not, so that rig honours Ctrl-C or SIGTERM at once there.
	StopWait time.Duration
}

// DefaultStopWait is how long an interrupted driver may take to stop: pulumi ends the resource
// operation under way, and killing it mid-way would leave state to repair.
const DefaultStopWait = 2 * time.Minute

// ExitError is a non-zero exit of rig-stack, whose messages already went to Stderr.
type ExitError struct {
	Verb string
	Code int
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("rig-stack %s failed with exit status %d (its messages are above)", e.Verb, e.Code)
}

// RunDriver runs `rig-stack args...` in the project folder with the caller's standard streams. An
// interrupt reaches rig-stack (and through it pulumi) as SIGINT, so an update can stop cleanly.
func RunDriver(ctx context.Context, o DriverOptions, args ...string) error {
	if o.ProjectDir == "" {
		o.ProjectDir = "."
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	bin, err := driverBinary(ctx, o)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = o.ProjectDir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = o.StopWait
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = DefaultStopWait
	}
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		verb := ""
		if len(args) > 0 {
			verb = args[0]
		}
		return &ExitError{Verb: verb, Code: ee.ExitCode()}
	}
	if err != nil {
		return fmt.Errorf("run the stack driver %s: %w", bin, err)
	}
	return nil
}

func driverBinary(ctx context.Context, o DriverOptions) (string, error) {
	if o.Binary != "" {
		return o.Binary, nil
	}
	if p := os.Getenv("RIG_STACK_DRIVER"); p != "" {
		return p, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", ErrNoGo
	}
	cache := o.CacheDir
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("%w (no cache folder: %v)", ErrNoGo, err)
		}
		cache = filepath.Join(base, "rig")
	}
	out := filepath.Join(cache, "rig-stack")
	if _, err := os.Stat(out); err != nil {
		fmt.Fprintln(o.Stderr, "rig: building the stack driver (go build ./infra/stackctl); the first build compiles the Pulumi Automation API and the AWS EC2 SDK and takes several minutes")
	}
	// go build skips the work when the binary is up to date with the sources.
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "./infra/stackctl")
	cmd.Dir = o.ProjectDir
	cmd.Stdout, cmd.Stderr = o.Stderr, o.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build the stack driver (go build ./infra/stackctl in %s): %w", o.ProjectDir, err)
	}
	return out, nil
}
