// Package stack drives the rig's Pulumi project (Pulumi.yaml at the repository root) through the
// Automation API: up, down (archive first, then destroy), status and gc of expired stacks. It
// never links pulumi-aws: Pulumi builds the program in infra/ itself, as a plain `pulumi up` does.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"

	"github.com/rig-dev/rig/infra/hostkey"
	"github.com/rig-dev/rig/infra/inventory"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/results/archive"
)

// Errors callers act on.
var (
	// ErrNoPulumi means the pulumi CLI is not installed (or not on PATH).
	ErrNoPulumi = errors.New("the pulumi CLI was not found on PATH: install it with " +
		"`curl -fsSL https://get.pulumi.com | sh` (or see https://www.pulumi.com/docs/iac/download-install/), " +
		"open a new shell so that `pulumi version` works, and run this again; nothing was created")
	// ErrNoAWSCredentials means the AWS SDK's default chain found no credentials.
	ErrNoAWSCredentials = errors.New("no AWS credentials: set AWS_PROFILE (after `aws configure` or `aws sso login`) " +
		"or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; nothing was created")
	// ErrNoStackConfig means Pulumi.<stack>.yaml does not exist next to Pulumi.yaml.
	ErrNoStackConfig = errors.New("no stack config")
	// ErrNoStack means the backend has no such stack.
	ErrNoStack = errors.New("no such stack")
	// ErrNoInventory means the stack has no inventory output (never deployed, or destroyed).
	ErrNoInventory = errors.New("stack has no inventory output")
)

// Options configure a Driver.
type Options struct {
	// ProjectDir holds Pulumi.yaml and the Pulumi.<stack>.yaml files; "" means the working folder.
	ProjectDir string
	// Command runs the pulumi CLI; nil means the pulumi found on PATH. Tests pass a stand-in.
	Command auto.PulumiCommand
	// StateDir is the local file backend used when the user has configured none;
	// "" means $XDG_STATE_HOME/rig/pulumi (or ~/.local/state/rig/pulumi).
	StateDir string
	// Env is passed to every CLI invocation on top of what the driver sets.
	Env map[string]string
	// ResultsDir holds the run folders `down` archives; "" means "results".
	ResultsDir string
	// CheckCredentials verifies AWS credentials for a region before anything is created;
	// nil means the AWS SDK's default chain (see CheckAWSCredentials).
	CheckCredentials func(ctx context.Context, region string) error
	// NewDest opens an archive destination; nil means a local folder or S3 through the SDK.
	NewDest func(ctx context.Context, loc archive.Location, region string) (archive.Dest, error)
	// Out receives the CLI's progress; nil means io.Discard.
	Out    io.Writer
	Logger *slog.Logger
	// Now is the clock for created-at and gc; nil means time.Now.
	Now func() time.Time
}

// Driver runs stack operations.
type Driver struct {
	opts      Options
	cmd       auto.PulumiCommand
	env       map[string]string
	ownState  bool // the driver chose the local file backend
	stateDir  string
	log       *slog.Logger
	projectOK bool
}

// New finds the pulumi CLI and decides on a backend. It creates nothing.
func New(opts Options) (*Driver, error) {
	if opts.ProjectDir == "" {
		opts.ProjectDir = "."
	}
	if opts.ResultsDir == "" {
		opts.ResultsDir = "results"
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CheckCredentials == nil {
		opts.CheckCredentials = CheckAWSCredentials
	}
	if opts.NewDest == nil {
		opts.NewDest = DefaultDest
	}
	d := &Driver{opts: opts, log: opts.Logger, env: map[string]string{"PULUMI_SKIP_UPDATE_CHECK": "true"}}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Stat(filepath.Join(opts.ProjectDir, "Pulumi.yaml")); err != nil {
		return nil, fmt.Errorf("find the rig's Pulumi project: %w (run rig from the repository root, or pass its path)", err)
	}
	d.cmd = opts.Command
	if d.cmd == nil {
		if _, err := exec.LookPath("pulumi"); err != nil {
			return nil, ErrNoPulumi
		}
		c, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{})
		if err != nil {
			return nil, fmt.Errorf("%w (found pulumi on PATH, but: %v)", ErrNoPulumi, err)
		}
		d.cmd = c
	}
	if err := d.chooseBackend(); err != nil {
		return nil, err
	}
	for k, v := range opts.Env {
		d.env[k] = v
	}
	return d, nil
}

// chooseBackend keeps a backend the user configured (PULUMI_BACKEND_URL or `pulumi login`) and
// otherwise uses a local file backend, so that trying the rig needs no Pulumi Cloud account.
func (d *Driver) chooseBackend() error {
	if os.Getenv("PULUMI_BACKEND_URL") != "" || d.opts.Env["PULUMI_BACKEND_URL"] != "" || loggedIn() {
		return nil
	}
	dir := d.opts.StateDir
	if dir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return fmt.Errorf("choose a local Pulumi backend: %w (set PULUMI_BACKEND_URL)", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(base, "rig", "pulumi")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	d.ownState, d.stateDir = true, abs
	d.env["PULUMI_BACKEND_URL"] = "file://" + filepath.ToSlash(abs)
	if os.Getenv("PULUMI_CONFIG_PASSPHRASE") == "" && os.Getenv("PULUMI_CONFIG_PASSPHRASE_FILE") == "" {
		d.env["PULUMI_CONFIG_PASSPHRASE_FILE"] = filepath.Join(abs, "passphrase")
	}
	return nil
}

// loggedIn reports whether `pulumi login` chose a backend (the CLI records it in credentials.json).
// Only the "current" field is read.
func loggedIn() bool {
	home := os.Getenv("PULUMI_HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return false
		}
		home = filepath.Join(h, ".pulumi")
	}
	b, err := os.ReadFile(filepath.Join(home, "credentials.json"))
	if err != nil {
		return false
	}
	var c struct {
		Current string `json:"current"`
	}
	return json.Unmarshal(b, &c) == nil && c.Current != ""
}

// Backend describes where stacks live, for messages.
func (d *Driver) Backend() string {
	if d.ownState {
		return d.env["PULUMI_BACKEND_URL"] + " (local file backend chosen by rig; set PULUMI_BACKEND_URL to use another)"
	}
	if v := d.opts.Env["PULUMI_BACKEND_URL"]; v != "" {
		return v
	}
	if v := os.Getenv("PULUMI_BACKEND_URL"); v != "" {
		return v
	}
	return "the backend of `pulumi login`"
}

// prepareState creates the local backend folder and its passphrase file, once, before the first
// operation that writes state.
func (d *Driver) prepareState() error {
	if !d.ownState {
		return nil
	}
	if err := os.MkdirAll(d.stateDir, 0o700); err != nil {
		return fmt.Errorf("create local Pulumi backend %s: %w", d.stateDir, err)
	}
	pf, ok := d.env["PULUMI_CONFIG_PASSPHRASE_FILE"]
	if !ok {
		return nil
	}
	if _, err := os.Stat(pf); err == nil {
		return nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	if err := os.WriteFile(pf, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write stack secrets passphrase: %w", err)
	}
	fmt.Fprintf(d.opts.Out, "rig: created %s (encrypts stack secrets; keep it, plain pulumi needs PULUMI_CONFIG_PASSPHRASE_FILE=%s)\n", pf, pf)
	return nil
}

func (d *Driver) workspaceOpts() []auto.LocalWorkspaceOption {
	return []auto.LocalWorkspaceOption{auto.Pulumi(d.cmd), auto.EnvVars(d.env)}
}

// StackConfigPath is where a stack's config lives.
func (d *Driver) StackConfigPath(stack string) string {
	return filepath.Join(d.opts.ProjectDir, "Pulumi."+stack+".yaml")
}

// LoadSpec reads and validates Pulumi.<stack>.yaml.
func (d *Driver) LoadSpec(stack string) (*spec.StackConfig, spec.Spec, spec.Problems, error) {
	path := d.StackConfigPath(stack)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, spec.Spec{}, nil, fmt.Errorf("%w: %s does not exist: create it with aws:region, rig:owner, "+
			"rig:operatorCidrs and rig:publicKey (Pulumi.yaml lists every key)", ErrNoStackConfig, path)
	}
	sc, err := spec.ReadStackConfig(path)
	if err != nil {
		return nil, spec.Spec{}, nil, err
	}
	s, probs := sc.Spec()
	return sc, s, probs, nil
}

// UpOptions tune Up.
type UpOptions struct {
	// Warn receives each warning-level problem (e.g. a volume above its instance's EBS baseline).
	Warn func(spec.Problem)
}

// Up validates the stack config, checks AWS credentials, pins the generated config (host key seed,
// created-at) and runs `pulumi up`, streaming progress. It returns the deployed inventory.
func (d *Driver) Up(ctx context.Context, stack string, o UpOptions) (*inventory.Inventory, error) {
	sc, s, probs, err := d.LoadSpec(stack)
	if err != nil {
		return nil, err
	}
	if o.Warn != nil {
		for _, w := range probs.Warnings() {
			o.Warn(w)
		}
	}
	if err := probs.Err(); err != nil {
		return nil, err
	}
	if err := d.opts.CheckCredentials(ctx, s.Region); err != nil {
		return nil, err
	}
	if err := d.prepareState(); err != nil {
		return nil, err
	}
	st, err := auto.UpsertStackLocalSource(ctx, stack, d.opts.ProjectDir, d.workspaceOpts()...)
	if err != nil {
		return nil, fmt.Errorf("select or create stack %s: %w", stack, err)
	}
	if !sc.Secrets["hostKeySeed"] {
		seed, err := hostkey.NewSeed()
		if err != nil {
			return nil, err
		}
		if err := st.SetConfig(ctx, spec.Namespace+":hostKeySeed", auto.ConfigValue{Value: seed, Secret: true}); err != nil {
			return nil, fmt.Errorf("store host key seed of %s: %w", stack, err)
		}
	}
	if _, ok := sc.Values["createdAt"]; !ok {
		now := d.opts.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
		if err := st.SetConfig(ctx, spec.Namespace+":createdAt", auto.ConfigValue{Value: now}); err != nil {
			return nil, fmt.Errorf("pin created-at of %s: %w", stack, err)
		}
	}
	d.log.Info("pulumi up", "stack", stack, "backend", d.Backend())
	res, err := st.Up(ctx, optup.ProgressStreams(d.opts.Out), optup.ErrorProgressStreams(d.opts.Out))
	if err != nil {
		return nil, fmt.Errorf("pulumi up %s: %w", stack, err)
	}
	return decodeInventory(stack, res.Outputs)
}

// DownOptions tune Down.
type DownOptions struct {
	// ArchiveTo overrides where the stack's runs are archived: s3://bucket/prefix or a folder.
	// "" means s3://<the stack's results bucket>/<stack>/ when the bucket is retained.
	ArchiveTo string
	// SkipArchive destroys without archiving (the runs stay in the results folder).
	SkipArchive bool
}

// Down archives every run of the stack (results/*/manifest.json with "stack": <stack>), verifies
// each archive, and only then destroys the stack. Any archive failure leaves the stack standing.
func (d *Driver) Down(ctx context.Context, stack string, o DownOptions) error {
	st, err := d.selectStack(ctx, stack)
	if err != nil {
		return err
	}
	if !o.SkipArchive {
		if err := d.archiveRuns(ctx, st, stack, o.ArchiveTo); err != nil {
			return fmt.Errorf("down %s: nothing destroyed: %w", stack, err)
		}
	}
	d.log.Info("pulumi destroy", "stack", stack)
	if _, err := st.Destroy(ctx, optdestroy.ProgressStreams(d.opts.Out), optdestroy.ErrorProgressStreams(d.opts.Out)); err != nil {
		return fmt.Errorf("pulumi destroy %s: %w", stack, err)
	}
	return nil
}

func (d *Driver) archiveRuns(ctx context.Context, st auto.Stack, stack, to string) error {
	runs, err := archive.RunsForStack(d.opts.ResultsDir, stack)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		fmt.Fprintf(d.opts.Out, "rig: no runs of stack %s under %s to archive\n", stack, d.opts.ResultsDir)
		return nil
	}
	outs, err := st.Outputs(ctx)
	if err != nil {
		return fmt.Errorf("read outputs of %s: %w", stack, err)
	}
	if to == "" {
		bucket, _ := outs[spec.OutputBucket].Value.(string)
		retained, _ := outs[spec.OutputRetain].Value.(bool)
		switch {
		case bucket == "":
			return fmt.Errorf("stack %s has no results bucket output: pass --to s3://bucket/prefix or --to DIR", stack)
		case !retained:
			return fmt.Errorf("the results bucket of %s is destroyed with the stack (retainBucket false): pass --to s3://other-bucket/prefix or --to DIR", stack)
		}
		to = "s3://" + bucket + "/" + stack
	}
	loc, err := archive.ParseLocation(to)
	if err != nil {
		return err
	}
	_, s, _, err := d.LoadSpec(stack)
	if err != nil && !errors.Is(err, ErrNoStackConfig) {
		return err
	}
	dest, err := d.opts.NewDest(ctx, loc, s.Region)
	if err != nil {
		return fmt.Errorf("open archive destination %s: %w", to, err)
	}
	for _, run := range runs {
		m, err := archive.Archive(ctx, archive.Options{RunDir: run, Dest: dest, Logger: d.log})
		if err != nil {
			return err
		}
		fmt.Fprintf(d.opts.Out, "rig: archived %s to %s%s (%d files, sha256 %s, verified)\n", run, dest, m.Archive, len(m.Files), m.ArchiveSHA256[:16])
	}
	return nil
}

func (d *Driver) selectStack(ctx context.Context, stack string) (auto.Stack, error) {
	st, err := auto.SelectStackLocalSource(ctx, stack, d.opts.ProjectDir, d.workspaceOpts()...)
	if err != nil {
		if auto.IsSelectStack404Error(err) {
			return auto.Stack{}, fmt.Errorf("%w: %s in %s", ErrNoStack, stack, d.Backend())
		}
		return auto.Stack{}, fmt.Errorf("select stack %s: %w", stack, err)
	}
	return st, nil
}

// Inventory reads the inventory output of a deployed stack.
func (d *Driver) Inventory(ctx context.Context, stack string) (*inventory.Inventory, error) {
	st, err := d.selectStack(ctx, stack)
	if err != nil {
		return nil, err
	}
	outs, err := st.Outputs(ctx)
	if err != nil {
		return nil, fmt.Errorf("read outputs of %s: %w", stack, err)
	}
	return decodeInventory(stack, outs)
}

func decodeInventory(stack string, outs auto.OutputMap) (*inventory.Inventory, error) {
	raw, ok := outs[spec.OutputInventory]
	if !ok || raw.Value == nil {
		return nil, fmt.Errorf("%w: %s (run rig up --stack %s)", ErrNoInventory, stack, stack)
	}
	b, err := json.Marshal(raw.Value)
	if err != nil {
		return nil, err
	}
	var inv inventory.Inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("decode inventory of %s: %w", stack, err)
	}
	if err := inv.Validate(); err != nil {
		return nil, fmt.Errorf("inventory of %s: %w", stack, err)
	}
	return &inv, nil
}

// Status is one stack as `rig status` shows it.
type Status struct {
	Name          string
	LastUpdate    string
	Resources     int
	Nodes         int
	Bucket        string
	ExpiresAt     time.Time // zero when unknown
	Expired       bool
	Updating      bool
	InventoryNote string // why there is no inventory, if there is none
}

// Statuses lists the project's stacks with their expiry, sorted by name.
func (d *Driver) Statuses(ctx context.Context) ([]Status, error) {
	ws, err := auto.NewLocalWorkspace(ctx, append(d.workspaceOpts(), auto.WorkDir(d.opts.ProjectDir))...)
	if err != nil {
		return nil, err
	}
	if d.ownState {
		if _, err := os.Stat(d.stateDir); errors.Is(err, os.ErrNotExist) {
			return nil, nil // rig never created a stack here
		}
	}
	list, err := ws.ListStacks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list stacks in %s: %w", d.Backend(), err)
	}
	now := d.opts.Now()
	var out []Status
	for _, s := range list {
		st := Status{Name: s.Name, LastUpdate: s.LastUpdate, Updating: s.UpdateInProgress}
		if s.ResourceCount != nil {
			st.Resources = *s.ResourceCount
		}
		outs, err := ws.StackOutputs(ctx, s.Name)
		if err != nil {
			st.InventoryNote = "outputs unreadable: " + firstLine(err.Error())
		} else {
			if v, ok := outs[spec.OutputExpiresAt].Value.(string); ok {
				st.ExpiresAt, _ = time.Parse(time.RFC3339, v)
			}
			st.Bucket, _ = outs[spec.OutputBucket].Value.(string)
			if inv, err := decodeInventory(s.Name, outs); err == nil {
				st.Nodes = len(inv.Nodes)
			} else {
				st.InventoryNote = "no inventory"
			}
		}
		if st.ExpiresAt.IsZero() {
			st.ExpiresAt = d.expiryFromConfig(s.Name)
		}
		st.Expired = !st.ExpiresAt.IsZero() && now.After(st.ExpiresAt)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// expiryFromConfig covers stacks whose update failed before exporting outputs.
func (d *Driver) expiryFromConfig(stack string) time.Time {
	sc, err := spec.ReadStackConfig(d.StackConfigPath(stack))
	if err != nil {
		return time.Time{}
	}
	s, _ := spec.FromConfig(stack, sc.Region, sc.Values)
	if s.CreatedAt.IsZero() {
		return time.Time{}
	}
	return s.ExpiresAt()
}

// GCOptions tune GC.
type GCOptions struct {
	DryRun bool
	// Confirm is asked once with the expired stacks; destroying proceeds only on true.
	Confirm func([]Status) bool
	// Down tunes the archive step of each destroyed stack.
	Down DownOptions
}

// GC finds stacks past their expires-at and, unless DryRun, destroys them after confirmation,
// archiving their runs first as Down does. It returns the expired stacks and the first error;
// a stack that fails is left standing and the others still go.
func (d *Driver) GC(ctx context.Context, o GCOptions) ([]Status, error) {
	all, err := d.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	var expired []Status
	for _, s := range all {
		if s.Expired && !s.Updating {
			expired = append(expired, s)
		}
	}
	if o.DryRun || len(expired) == 0 {
		return expired, nil
	}
	if o.Confirm == nil || !o.Confirm(expired) {
		return expired, ErrNotConfirmed
	}
	var errs []error
	for _, s := range expired {
		if err := d.Down(ctx, s.Name, o.Down); err != nil {
			errs = append(errs, err)
		}
	}
	return expired, errors.Join(errs...)
}

// ErrNotConfirmed means the user did not confirm a destructive gc.
var ErrNotConfirmed = errors.New("not confirmed; nothing destroyed")

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
