package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"golang.org/x/crypto/ssh"
	"gopkg.in/yaml.v3"

	"github.com/rig-dev/rig/infra/spec"
)

// Pulumi.yaml declares exactly the keys the program reads, with the same types, defaults and
// secrecy, and points Pulumi at this folder.
func TestPulumiYAMLMatchesSpecKeys(t *testing.T) {
	proj, err := workspace.LoadProject("../Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := proj.Validate(); err != nil {
		t.Fatal(err)
	}
	if proj.Name != spec.Namespace || proj.Runtime.Name() != "go" || proj.Main != "infra/" {
		t.Fatalf("name %q runtime %q main %q", proj.Name, proj.Runtime.Name(), proj.Main)
	}
	if len(proj.Config) != len(spec.Keys) {
		t.Errorf("Pulumi.yaml has %d config keys, the spec %d", len(proj.Config), len(spec.Keys))
	}
	for _, k := range spec.Keys {
		c, ok := proj.Config[k.Name]
		if !ok {
			t.Errorf("Pulumi.yaml lacks %s", k.Name)
			continue
		}
		if c.TypeName() != k.Type || c.Secret != k.Secret || c.Description == "" {
			t.Errorf("%s: type %s secret %v, want %s %v", k.Name, c.TypeName(), c.Secret, k.Type, k.Secret)
		}
		if fmt.Sprint(c.Default) != fmt.Sprint(k.Default) {
			t.Errorf("%s: default %v in Pulumi.yaml, %v in the spec", k.Name, c.Default, k.Default)
		}
		if k.Type == spec.TypeArray && (c.Items == nil || c.Items.Type != spec.TypeString) {
			t.Errorf("%s: array without string items", k.Name)
		}
	}
}

type recorder struct {
	mu  sync.Mutex
	res map[string][]resource.PropertyMap
}

func (r *recorder) NewResource(a pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res[a.TypeToken] = append(r.res[a.TypeToken], a.Inputs)
	out := a.Inputs.Copy()
	switch a.TypeToken {
	case "aws:ec2/instance:Instance":
		out["publicIp"], out["privateIp"] = resource.NewStringProperty("198.51.100.1"), resource.NewStringProperty("10.42.1.1")
	case "aws:s3/bucketV2:BucketV2":
		out["bucket"] = resource.NewStringProperty("rig-cfg-1")
	}
	return a.Name + "-id", out, nil
}

func (r *recorder) Call(a pulumi.MockCallArgs) (resource.PropertyMap, error) {
	if a.Token == "aws:ssm/getParameter:getParameter" {
		return resource.PropertyMap{"value": resource.NewStringProperty("ami-0aaaabbbbccccdddd")}, nil
	}
	return nil, fmt.Errorf("unexpected invoke %s", a.Token)
}

func runProgram(t *testing.T, cfg map[string]string) (*recorder, error) {
	t.Helper()
	b, _ := json.Marshal(cfg)
	t.Setenv(pulumi.EnvConfig, string(b))
	rec := &recorder{res: map[string][]resource.PropertyMap{}}
	err := pulumi.RunErr(program, pulumi.WithMocks("rig", "cfg", rec))
	return rec, err
}

func baseConfig(t *testing.T) map[string]string {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	k, _ := ssh.NewPublicKey(pub)
	return map[string]string{
		"aws:region": "us-west-2", "rig:servers": "2", "rig:volumeThroughput": "500", "rig:owner": "bob",
		"rig:operatorCidrs": `["203.0.113.7/32"]`, "rig:publicKey": strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))),
		"rig:hostKeySeed": strings.Repeat("ab", 32), "rig:createdAt": "2025-06-01T12:00:00Z",
	}
}

// The program reads the stack config the way Pulumi hands it over (all strings, lists as JSON).
func TestProgramReadsStackConfig(t *testing.T) {
	rec, err := runProgram(t, baseConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	insts := rec.res["aws:ec2/instance:Instance"]
	if len(insts) != 3 {
		t.Fatalf("%d instances, want 2 servers + 1 client", len(insts))
	}
	for _, in := range insts {
		if in["availabilityZone"].StringValue() != "us-west-2a" || in["tags"].ObjectValue()["owner"].StringValue() != "bob" {
			t.Errorf("instance %v", in)
		}
	}
	for _, v := range rec.res["aws:ebs/volume:Volume"] {
		if v["throughput"].NumberValue() != 500 {
			t.Errorf("volume throughput %v", v["throughput"])
		}
	}
}

// A multi-az stack config, as Pulumi hands it over: the AZ list arrives as JSON, and every
// server lands in its own AZ's subnet, the client with node-1.
func TestProgramReadsMultiAZConfig(t *testing.T) {
	cfg := baseConfig(t)
	cfg["rig:servers"], cfg["rig:placement"] = "3", "multi-az"
	cfg["rig:availabilityZones"] = `["us-west-2b","us-west-2c","us-west-2d"]`
	cfg["rig:clientAvailabilityZone"] = "node-1"
	rec, err := runProgram(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var zones []string
	for _, in := range rec.res["aws:ec2/instance:Instance"] {
		zones = append(zones, in["availabilityZone"].StringValue())
	}
	sort.Strings(zones)
	if want := []string{"us-west-2b", "us-west-2c", "us-west-2c", "us-west-2d"}; !slices.Equal(zones, want) {
		t.Errorf("instances in %v, want %v", zones, want)
	}
	if n := len(rec.res["aws:ec2/subnet:Subnet"]); n != 3 {
		t.Errorf("%d subnets, want 3", n)
	}
	if pg := rec.res["aws:ec2/placementGroup:PlacementGroup"]; len(pg) != 1 || pg[0]["strategy"].StringValue() != "spread" {
		t.Errorf("placement groups %v", pg)
	}
}

func TestProgramRefusesBadConfig(t *testing.T) {
	cfg := baseConfig(t)
	cfg["rig:servers"] = "two"
	cfg["rig:volumeThroughput"] = "1500"
	rec, err := runProgram(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "rig:servers") || !strings.Contains(err.Error(), "rig:volumeThroughput") {
		t.Fatalf("want one error naming both rig:servers and rig:volumeThroughput, got %v", err)
	}
	for typ := range rec.res {
		if !strings.HasPrefix(typ, "pulumi:") {
			t.Errorf("%s registered despite the error", typ)
		}
	}
}

// rig validate holds stack config values to Pulumi.yaml's types exactly as the Pulumi engine does:
// spec's check agrees with the engine's own workspace.ValidateConfigValue, applied to the value
// as the engine reads it from the stack file (config.Value from YAML, then ToObject).
func TestStackConfigTypesMatchTheEngine(t *testing.T) {
	proj, err := workspace.LoadProject("../Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values := []string{`3`, `"3"`, `" 3"`, `1.0`, `1.5`, `-2`, `0x10`, `true`, `"true"`, `True`, `"TRUE"`, `"yes"`, `no`,
		`""`, `null`, `abc`, `'["203.0.113.7/32"]'`, `["203.0.113.7/32"]`, `[]`, `[1, 2]`, `["a", 1]`, `[true]`,
		`{a: 1}`, `203.0.113.7/32`}
	for _, name := range []string{"servers", "retainBucket", "owner", "operatorCidrs"} {
		k, _ := spec.KeyByName(name)
		c := proj.Config[name]
		for _, v := range values {
			var cv config.Value
			if err := yaml.Unmarshal([]byte(v), &cv); err != nil {
				t.Fatal(err)
			}
			obj, err := cv.ToObject()
			if err != nil {
				t.Fatal(err)
			}
			engine := workspace.ValidateConfigValue(c.TypeName(), c.Items, obj)
			if rig := spec.ValueTypeError(k, v) == nil; rig != engine {
				t.Errorf("%s: %s: engine accepts=%v, rig accepts=%v", name, v, engine, rig)
			}
		}
	}
}

// A config refused inside the program (the engine's run of it, as `rig up` and plain `pulumi up`
// do) names each problem at the same file:line:column as `rig validate`, which reads the file
// itself: the lines of spec.StackConfig.Spec are in the engine's error, word for word.
func TestProgramRefusalsAreLocatedAsRigValidate(t *testing.T) {
	root := t.TempDir()
	cfg := baseConfig(t)
	file := "config:\n  aws:region: us-west-2\n  rig:owner: bob\n  rig:servers: 2\n" +
		"  rig:serverInstanceType: c7i.4xlarge\n" +
		"  rig:operatorCidrs: [\"203.0.113.7/32\"]\n  rig:publicKey: " + cfg["rig:publicKey"] + "\n" +
		"  rig:dataVolumes:\n    - a type=gp3 size=200 iops=4000 throughput=500\n    - b type=gp3 size=200 iops=4000 throughput=1000\n" +
		"  rig:rootVolumeSize: 4\n"
	path := filepath.Join(root, "Pulumi.cfg.yaml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := spec.ReadStackConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	_, want := sc.Spec()
	if len(want.Errors()) < 2 {
		t.Fatalf("the file should have at least two errors, rig validate finds %v", want)
	}
	// What the engine hands the program: the file's values, lists as JSON.
	engine := map[string]string{"aws:region": "us-west-2", "rig:hostKeySeed": cfg["rig:hostKeySeed"], "rig:createdAt": cfg["rig:createdAt"]}
	for k, v := range sc.Values {
		engine[spec.QualifiedKey(k)] = v
	}
	b, _ := json.Marshal(engine)
	t.Setenv(pulumi.EnvConfig, string(b))
	rec := &recorder{res: map[string][]resource.PropertyMap{}}
	err = pulumi.RunErr(program, pulumi.WithMocks("rig", "cfg", rec), func(ri *pulumi.RunInfo) { ri.RootDirectory = root })
	if err == nil {
		t.Fatal("the program accepted a config rig validate refuses")
	}
	for _, p := range want.Errors() {
		if !strings.HasPrefix(p.Pos, path+":") {
			t.Errorf("rig validate's problem has no line: %v", p)
		}
		if !strings.Contains(err.Error(), p.String()) {
			t.Errorf("the program's refusal lacks rig validate's line\n  %s\nin\n%v", p, err)
		}
	}
	for typ := range rec.res {
		if !strings.HasPrefix(typ, "pulumi:") {
			t.Errorf("%s registered despite the error", typ)
		}
	}
}
