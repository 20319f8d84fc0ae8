// Package automation drives the rig's Pulumi project (Pulumi.yaml at the repository root) through the
// Automation API: up, down (archive first, then destroy), status and gc of expired stacks. It
// never links pulumi-aws: Pulumi builds the program in infra/ itself, as a plain `pulumi up` does.
// It runs inside rig-stack (infra/stackctl), not the rig binary; see infra/stack for why.
package automation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/archive/s3dest"
	"github.com/rig-dev/rig/infra/awsconf"
	"github.com/rig-dev/rig/infra/hostkey"
	"github.com/rig-dev/rig/infra/preflight"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/inventory"
)

// Errors callers act on. ErrNoPulumi, ErrNoStack and ErrNoInventory are shared with the light
// stack package, which the rig binary uses.
var (
	ErrNoPulumi    = stack.ErrNoPulumi
	ErrNoStack     = stack.ErrNoStack
	ErrNoInventory = stack.ErrNoInventory
	// ErrNoAWSCredentials means the AWS SDK's default chain found no credentials.
	ErrNoAWSCredentials = errors.New("no AWS credentials: set AWS_PROFILE (after `aws configure` or `aws sso login`) " +
		"or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; nothing was created")
	// ErrNoStackConfig means Pulumi.<stack>.yaml does not exist next to Pulumi.yaml.
	ErrNoStackConfig = errors.New("no stack config")
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
	// BackendURL keeps the stacks in this Pulumi backend (s3://bucket/prefix?region=…, file://…,
	// https://api.pulumi.com); "" means PULUMI_BACKEND_URL, `pulumi login`, or rig's local folder.
	BackendURL string
	// SecretsProvider encrypts a new stack's secrets: awskms://alias/NAME?region=…, passphrase,
	// …; "" means Pulumi's default for the backend. A stack keeps the provider it was made with.
	SecretsProvider string
	// ResultsDir holds the run folders `down` archives; "" means "results".
	ResultsDir string
	// CheckCredentials verifies the stack's AWS credentials (its aws:profile and aws:region)
	// before anything is created; nil means CheckAWSCredentials.
	CheckCredentials func(ctx context.Context, t awsconf.Target) error
	// Preflight asks AWS whether the stack can be made (quota, zone, image, permissions) before
	// anything is created; its error stops the up. nil means infra/preflight with the stack's
	// AWS configuration (infra/awsconf), printing its warnings to Out.
	Preflight func(ctx context.Context, s spec.Spec) error
	// NewDest opens an archive destination; nil means a local folder or S3 through the SDK.
	// The target is the stack's profile and region.
	NewDest func(ctx context.Context, loc archive.Location, t awsconf.Target) (archive.Dest, error)
	// Out receives the CLI's progress; nil means io.Discard.
	Out    io.Writer
	Logger *slog.Logger
	// Now is the clock for created-at and gc; nil means time.Now.
	Now func() time.Time
}

// Driver runs stack operations.
type Driver struct {
	opts    Options
	cmd     auto.PulumiCommand
	backend stack.Backend
	log     *slog.Logger
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
		opts.NewDest = s3dest.OpenTarget
	}
	if opts.Preflight == nil {
		out := opts.Out
		opts.Preflight = func(ctx context.Context, s spec.Spec) error {
			cfg, err := Target(s).Load(ctx)
			if err != nil {
				return err
			}
			ps := preflight.Check(ctx, s, preflight.ClientsFromConfig(cfg))
			for _, w := range ps.Warnings() {
				fmt.Fprintln(out, "rig: "+w.String())
			}
			return ps.Err()
		}
	}
	d := &Driver{opts: opts, log: opts.Logger}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.cmd = opts.Command
	if d.cmd == nil {
		if _, err := stack.FindPulumi(); err != nil {
			return nil, err
		}
		c, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{})
		if err != nil {
			return nil, fmt.Errorf("%w (found pulumi on PATH, but: %v)", ErrNoPulumi, err)
		}
		d.cmd = c
	}
	if _, err := os.Stat(filepath.Join(opts.ProjectDir, "Pulumi.yaml")); err != nil {
		return nil, fmt.Errorf("find the rig's Pulumi project: %w (run rig from the repository root, or pass --project-dir)", err)
	}
	env := map[string]string{}
	for k, v := range opts.Env {
		env[k] = v
	}
	if opts.BackendURL != "" {
		env["PULUMI_BACKEND_URL"] = opts.BackendURL
	}
	b, err := stack.ChooseBackend(opts.StateDir, env)
	if err != nil {
		return nil, err
	}
	d.backend = b
	return d, nil
}

// Backend describes where stacks live, for messages.
func (d *Driver) Backend() string { return d.backend.String() }

// Where says in one line where a stack's state lives and what losing it means.
func (d *Driver) Where(name string) string {
	secrets := d.opts.SecretsProvider
	if sc, err := spec.ReadStackConfig(d.StackConfigPath(name)); err == nil && sc.SecretsProvider != "" {
		secrets = sc.SecretsProvider
	}
	return d.backend.Where(secrets)
}

func (d *Driver) workspaceOpts() []auto.LocalWorkspaceOption {
	return d.stackOpts(awsconf.Target{})
}

// stackOpts are workspaceOpts with the stack's AWS configuration in the CLI's environment.
func (d *Driver) stackOpts(t awsconf.Target) []auto.LocalWorkspaceOption {
	env := map[string]string{}
	for k, v := range d.backend.Env {
		env[k] = v
	}
	for k, v := range t.Env() {
		env[k] = v
	}
	o := []auto.LocalWorkspaceOption{auto.Pulumi(d.cmd), auto.EnvVars(env)}
	if d.opts.SecretsProvider != "" {
		o = append(o, auto.SecretsProvider(d.opts.SecretsProvider))
	}
	return o
}

// StackConfigPath is where a stack's config lives.
func (d *Driver) StackConfigPath(name string) string {
	return filepath.Join(d.opts.ProjectDir, "Pulumi."+name+".yaml")
}

// LoadSpec reads and validates Pulumi.<stack>.yaml. Every operation on a named stack starts
// here or in selectStack, which refuse a name outside the grammar (inventory.CheckStackName).
func (d *Driver) LoadSpec(name string) (*spec.StackConfig, spec.Spec, spec.Problems, error) {
	if err := inventory.CheckStackName("stack name", name); err != nil {
		return nil, spec.Spec{}, nil, err // before it becomes a path
	}
	path := d.StackConfigPath(name)
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
	// Confirm is asked, after preflight passed and before anything is created, whether to go
	// ahead with the plan: its error stops the up (ErrNotConfirmed when the answer was no).
	// nil means go ahead (the caller asked already, or --yes).
	Confirm func(spec.Spec) error
	// Quiesce stops the engine and unmounts the data volumes of the nodes it is given (as
	// DownOptions.Quiesce): Up calls it, with the nodes concerned, before an update that would
	// replace or remove volume attachments (DetachFirst). nil refuses such an update.
	Quiesce func(ctx context.Context, inv *inventory.Inventory) error
}

// Up validates the stack config, checks AWS credentials, pins the generated config (host key seed,
// created-at) and runs `pulumi up`, streaming progress. It returns the deployed inventory.
func (d *Driver) Up(ctx context.Context, name string, o UpOptions) (*inventory.Inventory, error) {
	sc, s, probs, err := d.LoadSpec(name)
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
	if err := d.check(ctx, name, s); err != nil {
		return nil, err
	}
	if o.Confirm != nil {
		if err := o.Confirm(s); err != nil {
			return nil, fmt.Errorf("up %s: %w", name, err)
		}
	}
	if err := d.backend.Prepare(d.opts.Out); err != nil {
		return nil, err
	}
	fmt.Fprintln(d.opts.Out, "rig: "+d.Where(name))
	st, err := auto.UpsertStackLocalSource(ctx, name, d.opts.ProjectDir, d.stackOpts(Target(s))...)
	if err != nil {
		return nil, fmt.Errorf("select or create stack %s: %w", name, err)
	}
	if !sc.Secrets["hostKeySeed"] {
		seed, err := hostkey.NewSeed()
		if err != nil {
			return nil, err
		}
		if err := st.SetConfig(ctx, spec.Namespace+":hostKeySeed", auto.ConfigValue{Value: seed, Secret: true}); err != nil {
			return nil, fmt.Errorf("store host key seed of %s: %w", name, err)
		}
	}
	// A stack without a generation is a new cluster (never up, or down since): it gets a new
	// generation and a created-at of now, so that a reused name is not born expired and gc can
	// tell its resources from an older cluster's of the same name.
	now := d.opts.Now().UTC().Truncate(time.Second)
	_, hasCreated := sc.Values["createdAt"]
	if s.Generation == "" {
		gen := spec.NewGeneration(now)
		if err := st.SetConfig(ctx, spec.Namespace+":generation", auto.ConfigValue{Value: gen}); err != nil {
			return nil, fmt.Errorf("set the generation of %s: %w", name, err)
		}
		fmt.Fprintf(d.opts.Out, "rig: %s: new generation %s\n", name, gen)
		hasCreated = false
	}
	if !hasCreated {
		if err := st.SetConfig(ctx, spec.Namespace+":createdAt", auto.ConfigValue{Value: now.Format(time.RFC3339)}); err != nil {
			return nil, fmt.Errorf("pin created-at of %s: %w", name, err)
		}
	}
	if err := DetachFirst(ctx, st, name, d.opts.Out, o.Quiesce); err != nil {
		return nil, fmt.Errorf("up %s: %w", name, err)
	}
	d.log.Info("pulumi up", "stack", name, "backend", d.Backend())
	p := newProgress(d.opts.Out, d.opts.Now, 30*time.Second)
	// Not ctx: the event tailer must be drained until the CLI ends, even after an interrupt.
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go p.run(pctx)
	res, err := st.Up(ctx, optup.EventStreams(p.events), optup.ErrorProgressStreams(d.opts.Out))
	stop()
	p.wait()
	if err != nil {
		d.failureReport(context.WithoutCancel(ctx), st, name, s, err, p.errors())
		return nil, fmt.Errorf("pulumi up %s: %w", name, err)
	}
	return decodeInventory(name, res.Outputs)
}

// check asks for the stack's credentials, then AWS whether the stack can be made.
func (d *Driver) check(ctx context.Context, name string, s spec.Spec) error {
	if err := d.opts.CheckCredentials(ctx, Target(s)); err != nil {
		return err
	}
	if err := d.opts.Preflight(ctx, s); err != nil {
		return fmt.Errorf("up %s: %w", name, err)
	}
	return nil
}

// Preflight runs the checks of Up without pinning or creating anything: the stack config, the
// stack's AWS credentials and preflight. ErrNoAWSCredentials says there were none to ask with.
func (d *Driver) Preflight(ctx context.Context, name string) error {
	_, s, probs, err := d.LoadSpec(name)
	if err != nil {
		return err
	}
	if err := probs.Err(); err != nil {
		return err
	}
	return d.check(ctx, name, s)
}

// DownOptions tune Down.
type DownOptions struct {
	// ArchiveTo overrides where the stack's runs are archived: s3://bucket/prefix or a folder.
	// "" means s3://<the stack's results bucket>/<stack>/ when the bucket is retained.
	ArchiveTo string
	// SkipArchive destroys without archiving (the runs stay in the results folder).
	SkipArchive bool
	// Quiesce runs after archiving and before destroying, with the stack's inventory: it asks
	// every node's agent to stop its engine, sync and unmount the data volume (infra/quiesce).
	// Its failure is reported and the destroy goes on: the runs are archived by then, the
	// attachments go with their instances (DeletedWith, infra/cluster: no DetachVolume), and
	// terminating an instance shuts its OS down.
	// nil means not asked (no SSH key), which Down says.
	Quiesce func(ctx context.Context, inv *inventory.Inventory) error
}

// Down archives every run of the stack (results/*/manifest.json with "stack": <stack>), verifies
// each archive, and only then destroys the stack. Any archive failure leaves the stack standing.
func (d *Driver) Down(ctx context.Context, name string, o DownOptions) error {
	st, err := d.selectStack(ctx, name)
	if err != nil {
		return err
	}
	if !o.SkipArchive {
		if err := d.archiveRuns(ctx, st, name, o.ArchiveTo); err != nil {
			return fmt.Errorf("down %s: nothing destroyed: %w", name, err)
		}
	}
	d.quiesce(ctx, st, name, o.Quiesce)
	d.log.Info("pulumi destroy", "stack", name)
	if _, err := st.Destroy(ctx, optdestroy.ProgressStreams(d.opts.Out), optdestroy.ErrorProgressStreams(d.opts.Out)); err != nil {
		return fmt.Errorf("pulumi destroy %s: %w", name, err)
	}
	// The generation ends with its resources: the next up of this name is a new cluster.
	for _, k := range []string{"generation", "createdAt"} {
		if err := st.RemoveConfig(ctx, spec.Namespace+":"+k); err != nil {
			return fmt.Errorf("%s destroyed, but clearing rig:%s failed (remove it from %s before the next up): %w",
				name, k, d.StackConfigPath(name), err)
		}
	}
	return nil
}

// quiesce unmounts the data volumes before the destroy and says what it did.
func (d *Driver) quiesce(ctx context.Context, st auto.Stack, name string, q func(context.Context, *inventory.Inventory) error) {
	if q == nil {
		fmt.Fprintf(d.opts.Out, "rig: not unmounting the data volumes of %s (no --ssh-key): terminating each instance "+
			"shuts it down, and the attachments are declared so that destroy does not wait on them\n", name)
		return
	}
	outs, err := st.Outputs(ctx)
	if err != nil {
		fmt.Fprintf(d.opts.Out, "rig: cannot read the outputs of %s to reach its nodes (%v); destroying without unmounting\n", name, firstLine(err.Error()))
		return
	}
	inv, err := decodeInventory(name, outs)
	if err != nil {
		fmt.Fprintf(d.opts.Out, "rig: %s has no inventory (%v); nothing to unmount\n", name, firstLine(err.Error()))
		return
	}
	fmt.Fprintf(d.opts.Out, "rig: stopping engines, syncing and unmounting data volumes on %d node(s) of %s before destroying\n", len(inv.Nodes), name)
	if err := q(ctx, inv); err != nil {
		fmt.Fprintf(d.opts.Out, "rig: not every data volume was unmounted (%v); destroying anyway: the runs are archived "+
			"and terminating an instance shuts its OS down\n", err)
	}
}

func (d *Driver) archiveRuns(ctx context.Context, st auto.Stack, name, to string) error {
	runs, err := archive.RunsForStack(d.opts.ResultsDir, name)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		fmt.Fprintf(d.opts.Out, "rig: no runs of stack %s under %s to archive\n", name, d.opts.ResultsDir)
		return nil
	}
	outs, err := st.Outputs(ctx)
	if err != nil {
		return fmt.Errorf("read outputs of %s: %w", name, err)
	}
	if to == "" {
		bucket, _ := outs[spec.OutputBucket].Value.(string)
		retained, _ := outs[spec.OutputRetain].Value.(bool)
		switch {
		case bucket == "":
			return fmt.Errorf("stack %s has no results bucket output: pass --to s3://bucket/prefix or --to DIR", name)
		case !retained:
			return fmt.Errorf("the results bucket of %s is destroyed with the stack (retainBucket false): pass --to s3://other-bucket/prefix or --to DIR", name)
		}
		to = "s3://" + bucket + "/" + name
	}
	loc, err := archive.ParseLocation(to)
	if err != nil {
		return err
	}
	_, s, _, err := d.LoadSpec(name)
	if err != nil && !errors.Is(err, ErrNoStackConfig) {
		return err
	}
	dest, err := d.opts.NewDest(ctx, loc, Target(s))
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

func (d *Driver) selectStack(ctx context.Context, name string) (auto.Stack, error) {
	if err := inventory.CheckStackName("stack name", name); err != nil {
		return auto.Stack{}, err // before it becomes a pulumi argument
	}
	st, err := auto.SelectStackLocalSource(ctx, name, d.opts.ProjectDir, d.workspaceOpts()...)
	if err != nil {
		if auto.IsSelectStack404Error(err) {
			return auto.Stack{}, fmt.Errorf("%w: %s in %s", ErrNoStack, name, d.Backend())
		}
		return auto.Stack{}, fmt.Errorf("select stack %s: %w", name, err)
	}
	return st, nil
}

// Inventory reads the inventory output of a deployed stack.
func (d *Driver) Inventory(ctx context.Context, name string) (*inventory.Inventory, error) {
	st, err := d.selectStack(ctx, name)
	if err != nil {
		return nil, err
	}
	outs, err := st.Outputs(ctx)
	if err != nil {
		return nil, fmt.Errorf("read outputs of %s: %w", name, err)
	}
	return decodeInventory(name, outs)
}

func decodeInventory(stackName string, outs auto.OutputMap) (*inventory.Inventory, error) {
	return stack.DecodeInventory(stackName, outs[spec.OutputInventory].Value)
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
	if !d.backend.Exists() {
		return nil, nil // rig never created a stack here
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
func (d *Driver) expiryFromConfig(name string) time.Time {
	sc, err := spec.ReadStackConfig(d.StackConfigPath(name))
	if err != nil {
		return time.Time{}
	}
	s, _ := spec.FromConfig(name, sc.Region, sc.Values)
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
