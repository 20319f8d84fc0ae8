package realpulumi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/rig-dev/rig/infra/automation"
	"github.com/rig-dev/rig/infra/cluster"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/inventory"
)

// cliVersion is go.mod's github.com/pulumi/pulumi/sdk/v3: the engine the program is built against.
const cliVersion = "3.276.0"

const (
	typAttach = "aws:ec2/volumeAttachment:VolumeAttachment"
	typInst   = "aws:ec2/instance:Instance"
	typVol    = "aws:ebs/volume:Volume"
)

// pulumiCLI finds the CLI: $RIG_PULUMI (as run.sh builds it, ROOT/bin/pulumi), else PATH.
func pulumiCLI(t *testing.T) auto.PulumiCommand {
	path := os.Getenv("RIG_PULUMI")
	if path == "" {
		p, err := exec.LookPath("pulumi")
		if err != nil {
			t.Skip("optional tooling, skipped: no pulumi CLI (RIG_PULUMI or PATH); infra/realpulumi/run.sh builds v" + cliVersion +
				" from the Go module proxy and runs this check (docs/infra.md, \"The real-Pulumi check\")")
		}
		path = p
	}
	out, err := exec.Command(path, "version").Output()
	if err != nil || strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "v")) != cliVersion {
		t.Skipf("optional tooling, skipped: %s is %q, not v%s (go.mod's sdk); infra/realpulumi/run.sh builds it", path, strings.TrimSpace(string(out)), cliVersion)
	}
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(filepath.Dir(path)), Version: semver.MustParse(cliVersion)})
	if err != nil {
		t.Fatalf("the pulumi CLI at %s: %v (want ROOT/bin/pulumi)", path, err)
	}
	return cmd
}

// world is one stack on a local file backend with the stand-in provider installed.
type world struct {
	t       *testing.T
	st      auto.Stack
	dir     string // holds Pulumi.dev.yaml, which the inline program reads as `rig up` would
	provLog string
	state   string // the file backend's folder
	seed    string // rig:hostKeySeed: a new one changes every instance's user data
}

const standinVersion = "6.83.4" // the plugin version pulumi-aws/sdk/v6 asks for (go.mod)

func newWorld(t *testing.T, cli auto.PulumiCommand) *world {
	home, state, dir := t.TempDir(), t.TempDir(), t.TempDir()
	plugin := filepath.Join(home, "plugins", "resource-aws-v"+standinVersion, "pulumi-resource-aws")
	build := exec.Command("go", "build", "-o", plugin, "./standin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in provider: %v\n%s", err, out)
	}
	w := &world{t: t, dir: dir, state: state, provLog: filepath.Join(t.TempDir(), "provider.log"), seed: strings.Repeat("5a", 32)}
	env := map[string]string{
		"PULUMI_HOME": home, "PULUMI_BACKEND_URL": "file://" + state, "PULUMI_CONFIG_PASSPHRASE": "realpulumi",
		"PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true", "RIG_STANDIN_LOG": w.provLog,
	}
	for k, v := range env { // the provider is the CLI's child: it reads its environment
		t.Setenv(k, v)
	}
	proj := workspace.Project{Name: "rig", Runtime: workspace.NewProjectRuntimeInfo("go", nil)}
	st, err := auto.UpsertStackInlineSource(context.Background(), "dev", "rig", w.program,
		auto.Pulumi(cli), auto.EnvVars(env), auto.Project(proj), auto.WorkDir(dir))
	if err != nil {
		t.Fatalf("create the stack: %v", err)
	}
	if err := st.SetConfig(context.Background(), "aws:region", auto.ConfigValue{Value: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	w.st = st
	return w
}

// program is the inline program: Pulumi.dev.yaml read as the program in infra/ reads it, then
// cluster.Deploy with the file's positions.
func (w *world) program(ctx *pulumi.Context) error {
	sc, err := spec.ReadStackConfig(filepath.Join(w.dir, "Pulumi.dev.yaml"))
	if err != nil {
		return err
	}
	s, _ := sc.Spec()
	s.HostKeySeed = w.seed
	s.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out, err := cluster.Deploy(ctx, s, cluster.Options{Config: sc})
	if err != nil {
		return err
	}
	out.Export(ctx, s)
	return nil
}

const base = "config:\n  aws:region: us-east-1\n  rig:owner: alice\n  rig:operatorCidrs: [\"203.0.113.7/32\"]\n" +
	"  rig:publicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMkK0QfSmDpQzXQ3lXDXpvGmV2UQIJHeynVZWY9rIkyw alice@laptop\n"

func (w *world) config(extra string) {
	if err := os.WriteFile(filepath.Join(w.dir, "Pulumi.dev.yaml"), []byte(base+extra), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// step is one resourcePreEvent: what the engine does to a resource, in the order it reports it.
type step struct{ op, typ, name string }

func (s step) String() string { return s.op + " " + s.name }

func collect(ch chan events.EngineEvent, steps *[]step, done chan struct{}) {
	defer close(done)
	for e := range ch {
		if p := e.ResourcePreEvent; p != nil {
			m := p.Metadata
			*steps = append(*steps, step{string(m.Op), m.Type, m.URN[strings.LastIndex(m.URN, "::")+2:]})
		}
	}
}

func (w *world) up() (map[string]int, []step) {
	w.t.Helper()
	ch, done := make(chan events.EngineEvent), make(chan struct{})
	var steps []step
	go collect(ch, &steps, done)
	res, err := w.st.Up(context.Background(), optup.EventStreams(ch))
	<-done
	if err != nil {
		w.t.Fatalf("up: %v", err)
	}
	return *res.Summary.ResourceChanges, steps
}

func (w *world) preview() (map[string]int, []step) {
	w.t.Helper()
	ch, done := make(chan events.EngineEvent), make(chan struct{})
	var steps []step
	go collect(ch, &steps, done)
	res, err := w.st.Preview(context.Background(), optpreview.EventStreams(ch))
	<-done
	if err != nil {
		w.t.Fatalf("preview: %v", err)
	}
	counts := map[string]int{}
	for op, n := range res.ChangeSummary {
		counts[string(op)] = n
	}
	return counts, steps
}

// providerCalls returns and clears the stand-in's log of Create, Update and Delete calls.
func (w *world) providerCalls() []string {
	b, _ := os.ReadFile(w.provLog)
	_ = os.Remove(w.provLog)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// detachFirst does what rig up does before an update (infra/automation.DetachFirst), with an unmount
// that records the nodes it is asked for.
func (w *world) detachFirst() []string {
	w.t.Helper()
	var nodes []string
	var out strings.Builder
	err := automation.DetachFirst(context.Background(), w.st, "dev", &out, func(_ context.Context, inv *inventory.Inventory) error {
		for _, n := range inv.Nodes {
			nodes = append(nodes, n.Name)
		}
		return nil
	})
	if err != nil {
		w.t.Fatalf("detach first: %v\n%s", err, out.String())
	}
	w.t.Logf("detach first: %s", strings.TrimSpace(out.String()))
	return nodes
}

func count(steps []step, op, typ string) int {
	n := 0
	for _, s := range steps {
		if s.op == op && (typ == "" || s.typ == typ) {
			n++
		}
	}
	return n
}

func index(steps []step, op, name string) int {
	return slices.IndexFunc(steps, func(s step) bool { return s.op == op && s.name == name })
}

func TestRealPulumi(t *testing.T) {
	cli := pulumiCLI(t)
	w := newWorld(t, cli)
	ctx := context.Background()

	// 1. A single-az stack with the volume* keys' one volume per server.
	w.config("")
	created, _ := w.up()
	t.Logf("single-az up: %v", created)
	same, steps := w.preview()
	t.Logf("re-preview: %v", same)
	if created["create"] == 0 || same["same"] != created["create"] || len(same) != 1 {
		t.Errorf("up %v, then a preview of the same config %v: want only sames, as many as created", created, same)
	}
	_ = steps
	w.providerCalls()

	// Every instance depends on its subnet's association, the default route and the gateway.
	dep, err := w.st.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var d apitype.DeploymentV3
	if err := json.Unmarshal(dep.Deployment, &d); err != nil {
		t.Fatal(err)
	}
	edges := 0
	for _, r := range d.Resources {
		if string(r.Type) != typInst {
			continue
		}
		for _, want := range []string{"::rig-rta", "::rig-default-route", "::rig-igw"} {
			if !slices.ContainsFunc(r.Dependencies, func(u resource.URN) bool { return strings.HasSuffix(string(u), want) }) {
				t.Errorf("%s does not depend on %s: %v", r.URN, want, r.Dependencies)
			}
			edges++
		}
	}
	t.Logf("dependency edges instance -> rta/route/igw: %d", edges)
	// The state on disk holds no key material in the clear: the user data (host keys) is a
	// secret, encrypted with the passphrase (st.Export shows secrets, so the files are read).
	files := 0
	err = filepath.WalkDir(w.state, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), typInst) {
			files++ // a checkpoint with the instances, not only the backend's metadata
		}
		for _, bad := range []string{w.seed, "PRIVATE KEY", "ed25519_private"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s holds %.20q in the clear", path, bad)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Errorf("read the state files: %v (%d with the instances)", err, files)
	}

	// 2. From the volume* keys to rig:dataVolumes. A plain up would create each new attachment
	// at /dev/sdf while the old one still holds it (deletes of removed resources come last);
	// rig up detaches the old ones first.
	vols := "  rig:dataVolumes:\n    - a type=gp3 size=100 iops=3000 throughput=125\n    - b type=gp3 size=100 iops=3000 throughput=250\n"
	w.config(vols)
	plan, steps := w.preview()
	t.Logf("migration, preview: %v", plan)
	if c, dl := index(steps, "create", "node-0-data-a"), index(steps, "delete", "node-0-data"); c < 0 || dl < 0 || c > dl {
		t.Logf("migration preview steps: %v", steps)
	} else {
		t.Logf("a plain up would create node-0-data-a (step %d) before deleting node-0-data (step %d): rig up detaches first", c, dl)
	}
	nodes := w.detachFirst()
	detached := w.providerCalls()
	t.Logf("migration: unmounted %v; provider calls %v", nodes, detached)
	migrated, steps := w.up()
	t.Logf("migration up: %v", migrated)
	if n := count(steps, "delete", typAttach) + count(steps, "delete-replaced", typAttach); n != 0 {
		t.Errorf("the migration's up still deletes %d attachment(s) (after creating the new ones): %v", n, steps)
	}
	for _, c := range detached {
		if strings.HasPrefix(c, "create") {
			t.Errorf("detach first created something: %v", detached)
		}
	}
	if got := len(detached); got != len(nodes) || len(nodes) == 0 {
		t.Errorf("detach first: %d DetachVolume calls for %d unmounted node(s): %v", got, len(nodes), detached)
	}
	w.providerCalls()

	// 3. Reordering rig:dataVolumes swaps two devices per server: each attachment is replaced
	// delete-first, and rig up detaches them all before the update.
	w.config("  rig:dataVolumes:\n    - b type=gp3 size=100 iops=3000 throughput=250\n    - a type=gp3 size=100 iops=3000 throughput=125\n")
	plan, steps = w.preview()
	t.Logf("reorder, preview: %v", plan)
	replaced := 0
	for _, s := range steps {
		if s.typ == typAttach && s.op == "replace" {
			replaced++
			dr, cr := index(steps, "delete-replaced", s.name), index(steps, "create-replacement", s.name)
			if dr < 0 || cr < 0 || dr > cr {
				t.Errorf("%s: delete-replaced at step %d, create-replacement at %d: want the delete first", s.name, dr, cr)
			}
		}
	}
	if replaced == 0 {
		t.Errorf("a reorder replaced no attachment: %v", steps)
	}
	t.Logf("reorder: %d attachments replaced delete-first", replaced)
	nodes = w.detachFirst()
	detached = w.providerCalls()
	reordered, steps := w.up()
	t.Logf("reorder: unmounted %v, %d DetachVolume; up %v", nodes, len(detached), reordered)
	if len(detached) != replaced || count(steps, "create", typAttach) != replaced {
		t.Errorf("reorder: %d detached, %d created, want %d each: %v", len(detached), count(steps, "create", typAttach), replaced, steps)
	}
	w.providerCalls()

	// 3b. A new host key seed changes every instance's user data, which replaces the instances
	// and with them their attachments. Even a plain up (no detach first) detaches each volume
	// (a real Delete: the instance is replaced, not deleted with it) before attaching it again.
	w.seed = strings.Repeat("a5", 32)
	plan, _ = w.preview()
	t.Logf("replaced instances, preview: %v", plan)
	replacedUp, steps := w.up()
	calls := w.providerCalls()
	t.Logf("replaced instances, plain up: %v", replacedUp)
	for _, s := range steps {
		if s.typ != typAttach || s.op != "replace" {
			continue
		}
		del := slices.Index(calls, "delete "+typAttach+" "+s.name)
		cre := slices.Index(calls, "create "+typAttach+" "+s.name)
		if del < 0 || cre < 0 || del > cre {
			t.Errorf("%s: provider Delete at call %d, Create at %d: want a real detach first (calls %v)", s.name, del, cre, calls)
		}
	}
	if n := count(steps, "replace", typAttach); n != replaced {
		t.Errorf("replaced instances: %d attachments replaced, want %d", n, replaced)
	}

	// 4. Destroy: instances before the route, the associations and the gateway; no DetachVolume.
	ch, done := make(chan events.EngineEvent), make(chan struct{})
	steps = nil
	go collect(ch, &steps, done)
	res, err := w.st.Destroy(ctx, optdestroy.EventStreams(ch))
	<-done
	if err != nil {
		t.Fatal(err)
	}
	calls = w.providerCalls()
	t.Logf("destroy: %v", *res.Summary.ResourceChanges)
	lastInst := -1
	for i, s := range steps {
		if s.typ == typInst {
			lastInst = i
		}
	}
	for _, n := range []string{"rig-default-route", "rig-rta", "rig-igw"} {
		if i := index(steps, "delete", n); i < lastInst {
			t.Errorf("destroy deletes %s (step %d) before the last instance (step %d)", n, i, lastInst)
		}
	}
	for _, c := range calls {
		if strings.Contains(c, typAttach) {
			t.Errorf("destroy called DetachVolume: %v", c)
		}
	}

	// 5. A refused config is located as rig validate locates it, and creates nothing.
	w.config("  rig:serverInstanceType: c7i.4xlarge\n  rig:dataVolumes:\n    - a type=gp3 size=200 iops=4000 throughput=500\n" +
		"    - b type=gp3 size=200 iops=4000 throughput=1000\n")
	sc, _ := spec.ReadStackConfig(filepath.Join(w.dir, "Pulumi.dev.yaml"))
	_, want := sc.Spec()
	_, err = w.st.Up(ctx)
	for _, p := range want.Errors() {
		if err == nil || !strings.Contains(err.Error(), p.String()) {
			t.Errorf("the engine's refusal lacks %q: %v", p, err)
		}
	}
	if calls := w.providerCalls(); len(calls) != 0 {
		t.Errorf("a refused config made provider calls: %v", calls)
	}
	fmt.Fprintln(os.Stderr, "realpulumi done")
}
