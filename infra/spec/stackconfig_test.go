package spec

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rig-dev/rig/inventory"
)

func TestStackConfigValidFile(t *testing.T) {
	sc, err := ReadStackConfig("testdata/Pulumi.valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Stack != "valid" || sc.Region != "us-east-1" {
		t.Fatalf("stack %q region %q", sc.Stack, sc.Region)
	}
	s, ps := sc.Spec()
	if len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	if s.VolumeThroughput != 1000 || s.Servers != 3 || s.OperatorCIDRs[0] != "203.0.113.7/32" {
		t.Fatalf("%+v", s)
	}
}

func TestStackConfigAcceptanceFiles(t *testing.T) {
	cases := []struct {
		file, field, sev string
		want             []string
	}{
		{"testdata/Pulumi.gp3-1500.yaml", "volumeThroughput", "error",
			[]string{"Pulumi.gp3-1500.yaml:7:25", "rig:volumeThroughput = 1,500 MiB/s", "allowed 125-1,000 MiB/s"}},
		{"testdata/Pulumi.io2-70k-50g.yaml", "volumeIops", "error",
			[]string{"Pulumi.io2-70k-50g.yaml:8:19", "rig:volumeIops = 70,000", "<= 50,000 on 50 GiB"}},
		{"testdata/Pulumi.c7i-4xl-1000.yaml", "volumeThroughput", "warning",
			[]string{"Pulumi.c7i-4xl-1000.yaml:9:25", "1,000 MiB/s (1,049 MB/s)", "625 MB/s sustained on c7i.4xlarge"}},
	}
	for _, c := range cases {
		sc, err := ReadStackConfig(c.file)
		if err != nil {
			t.Fatal(err)
		}
		_, ps := sc.Spec()
		var got Problems
		for _, p := range ps.Field(c.field) {
			if p.Severity.String() == c.sev {
				got = append(got, p)
			}
		}
		if len(got) != 1 {
			t.Fatalf("%s: want one %s on %s, got %v", c.file, c.sev, c.field, ps)
		}
		if c.sev == "warning" && ps.Err() != nil {
			t.Fatalf("%s: warnings only, got errors %v", c.file, ps.Err())
		}
		if c.sev == "error" && ps.Err() == nil {
			t.Fatalf("%s: want an error", c.file)
		}
		for _, w := range c.want {
			if !strings.Contains(got[0].String(), w) {
				t.Errorf("%s: %q lacks %q", c.file, got[0], w)
			}
		}
	}
}

func TestStackConfigUnknownKeysSecretsAndShapes(t *testing.T) {
	data := []byte(`encryptionsalt: v1:abc
config:
  aws:region: eu-west-1
  aws:profile: lab
  servers: 2
  rig:volumeThroughputt: 900
  rig:hostKeySeed:
    secure: v1:AAAA
  rig:owner:
    nested: map
  rig:clients: "2"
`)
	sc, err := ParseStackConfig("Pulumi.x.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Values["servers"] != "2" || sc.Values["clients"] != "2" || !sc.Secrets["hostKeySeed"] {
		t.Fatalf("values %v secrets %v", sc.Values, sc.Secrets)
	}
	unknown := sc.Problems.Field("volumeThroughputt")
	if len(unknown) != 1 || unknown[0].Pos != "Pulumi.x.yaml:6:3" || !strings.Contains(unknown[0].Allowed, "volumeThroughput") {
		t.Fatalf("unknown key: %v", sc.Problems)
	}
	if len(sc.Problems.Field("owner")) != 1 {
		t.Fatalf("mapping value: %v", sc.Problems)
	}
	_, ps := sc.Spec()
	// The owner's bad shape is reported once, not again as "empty owner".
	if n := len(ps.Field("owner")); n != 1 {
		t.Fatalf("owner problems: %v", ps.Field("owner"))
	}
	// Missing required keys name the file and say they were not set.
	pk := ps.Field("publicKey")
	if len(pk) != 1 || !strings.Contains(pk[0].Pos, "not set") {
		t.Fatalf("publicKey: %v", pk)
	}

	plain := []byte("config:\n  rig:hostKeySeed: 00ff\n")
	sc, err = ParseStackConfig("Pulumi.y.yaml", plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Problems.Field("hostKeySeed")) != 1 {
		t.Fatalf("plaintext secret must be refused: %v", sc.Problems)
	}
}

func TestStackConfigBadYAML(t *testing.T) {
	_, err := ParseStackConfig("Pulumi.bad.yaml", []byte("config:\n  rig:servers: [1,\n"))
	if !errors.Is(err, ErrStackConfig) || !strings.Contains(err.Error(), "Pulumi.bad.yaml") {
		t.Fatalf("got %v", err)
	}
	_, err = ReadStackConfig("testdata/Pulumi.missing.yaml")
	if !errors.Is(err, ErrStackConfig) {
		t.Fatalf("got %v", err)
	}
}

func TestEstimateByHand(t *testing.T) {
	s := validSpec()
	s.ServerInstanceType, s.ClientInstanceType = "c7i.4xlarge", "c7i.large"
	s.VolumeSize, s.VolumeIOPS, s.VolumeThroughput = 100, 4000, 1000
	e, err := EstimateCost(s)
	if err != nil {
		t.Fatal(err)
	}
	// 3 x 0.714 + 0.08925, 4 public IPv4 at 0.005, 300 GB gp3 (servers only) + 120 GB root at
	// 0.08/GB-month, 3 x 1,000 IOPS at 0.005/month, 3 x 875 MiB/s at 0.04/month.
	want := 3*0.714 + 0.08925 + 4*0.005 + (300+120)*0.08/730 + 3000*0.005/730 + 2625*0.04/730
	if math.Abs(e.Hourly-want) > 1e-9 {
		t.Fatalf("hourly %.6f, want %.6f: %+v", e.Hourly, want, e.Lines)
	}
	if math.Abs(e.ToLimit-want*8) > 1e-9 {
		t.Fatalf("to limit %.4f", e.ToLimit)
	}
	// With rig:clientDataVolume the client's volume is priced too.
	s.ClientDataVolume = true
	e, err = EstimateCost(s)
	if err != nil {
		t.Fatal(err)
	}
	want = 3*0.714 + 0.08925 + 4*0.005 + (400+120)*0.08/730 + 4000*0.005/730 + 3500*0.04/730
	if math.Abs(e.Hourly-want) > 1e-9 {
		t.Fatalf("with client volume: hourly %.6f, want %.6f", e.Hourly, want)
	}

	s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 70000, 100
	e, err = EstimateCost(s)
	if err != nil {
		t.Fatal(err)
	}
	io2 := 0.0
	for _, l := range e.Lines {
		if strings.HasPrefix(l.Item, "io2 IOPS") {
			io2 += l.Hourly
		}
	}
	wantIO2 := 4 * (32000*0.065 + 32000*0.0455 + 6000*0.03185) / 730
	if math.Abs(io2-wantIO2) > 1e-9 {
		t.Fatalf("io2 IOPS %.6f, want %.6f", io2, wantIO2)
	}

	s.Region = "eu-west-1"
	if _, err := EstimateCost(s); !errors.Is(err, ErrNoPrices) {
		t.Fatalf("got %v", err)
	}
}

func TestEveryTableTypeHasAPrice(t *testing.T) {
	for _, r := range PricedRegions() {
		p, _ := Prices(r)
		for _, name := range InstanceNames() {
			if _, ok := p.InstanceHourly[name]; !ok {
				t.Errorf("%s: no price for %s", r, name)
			}
		}
	}
}

func TestPlanAndEstimateText(t *testing.T) {
	s := validSpec()
	var b bytes.Buffer
	if err := WritePlan(&b, s); err != nil {
		t.Fatal(err)
	}
	e, err := EstimateCost(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteEstimate(&b, e); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{"3 x c6in.16xlarge", "gp3 200 GiB, 4,000 IOPS, 1,000 MiB/s", "/dev/sdf", "TCP 22 from 203.0.113.7/32",
		"as of " + pricesAsOf, "us-east-1", "total", "/h"} {
		if !strings.Contains(out, w) {
			t.Errorf("plan lacks %q:\n%s", w, out)
		}
	}
}

// Syntax errors and binary junk are refused with file:line:column, before anything else runs.
func TestStackConfigSyntaxErrorsHavePositions(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"duplicate key", "config:\n  aws:region: us-east-1\n  rig:owner: a\n  rig:owner: b\n",
			`Pulumi.t.yaml:4:3: mapping key "rig:owner" already defined at line 3, column 3`},
		{"NUL byte", "config:\n  rig:owner: a\x00b\n", "Pulumi.t.yaml:2:15: control character U+0000"},
		{"invalid UTF-8", "config:\n  aws:region: us-east-1\n  rig:owner: \xff\xfe\n", "Pulumi.t.yaml:3:14: byte 0xff is not UTF-8 text"},
		{"unclosed list", "config:\n  rig:servers: [1,\n", "Pulumi.t.yaml:"},
	}
	for _, c := range cases {
		_, err := ParseStackConfig("Pulumi.t.yaml", []byte(c.body))
		if !errors.Is(err, ErrStackConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: want one line, got %q", c.name, err)
		}
	}
	// A byte-order mark is fine.
	sc, err := ParseStackConfig("Pulumi.t.yaml", []byte("\ufeffconfig:\n  rig:owner: alice\n"))
	if err != nil || sc.Values["owner"] != "alice" {
		t.Fatalf("BOM: %v %+v", err, sc)
	}
}

// Values are held to Pulumi.yaml's types as the engine holds them (see the cross-check against
// the engine's own function in infra/main_test.go).
func TestStackConfigTypesAsTheEngine(t *testing.T) {
	cases := []struct {
		line  string
		field string
		ok    bool
	}{
		{`rig:operatorCidrs: ["203.0.113.7/32"]`, "operatorCidrs", true},
		{"rig:operatorCidrs:\n    - 203.0.113.7/32", "operatorCidrs", true},
		{`rig:operatorCidrs: '["203.0.113.7/32"]'`, "operatorCidrs", false},
		{`rig:operatorCidrs: 203.0.113.7/32`, "operatorCidrs", false},
		{`rig:operatorCidrs: [1]`, "operatorCidrs", false},
		{`rig:servers: "3"`, "servers", true},
		{`rig:servers: 1.0`, "servers", true},
		{`rig:servers: " 3"`, "servers", false},
		{`rig:servers: 1.5`, "servers", false},
		{`rig:servers: [3]`, "servers", false},
		{`rig:retainBucket: True`, "retainBucket", true},
		{`rig:retainBucket: "false"`, "retainBucket", true},
		{`rig:retainBucket: "yes"`, "retainBucket", false},
		{`rig:retainBucket: "TRUE"`, "retainBucket", false},
		{`rig:owner: 42`, "owner", true},
		{`rig:owner: [a]`, "owner", false},
	}
	for _, c := range cases {
		sc, err := ParseStackConfig("Pulumi.t.yaml", []byte("config:\n  "+c.line+"\n"))
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		_, ps := sc.Spec()
		got := ps.Field(c.field).Errors()
		if c.ok != (len(got) == 0) {
			t.Errorf("%s: ok=%v, problems %v", c.line, c.ok, got)
		}
		if !c.ok && !strings.Contains(got[0].Pos, "Pulumi.t.yaml:2:") {
			t.Errorf("%s: position %q", c.line, got[0].Pos)
		}
	}
	sc, _ := ParseStackConfig("Pulumi.t.yaml", []byte("config:\n  rig:operatorCidrs: '[\"203.0.113.7/32\"]'\n"))
	_, ps := sc.Spec()
	if p := ps.Field("operatorCidrs"); len(p) != 1 || !strings.Contains(p[0].String(), "pulumi config set --path 'operatorCidrs[0]'") {
		t.Fatalf("want one problem saying how to set a list, got %v", p)
	}
}

// A stack config whose file name gives a stack name outside the grammar is refused before it is
// read, naming the file and what is valid.
func TestStackConfigNameGrammar(t *testing.T) {
	for _, path := range []string{"Pulumi.-rf.yaml", "Pulumi...yaml", "testdata/Pulumi.a b.yaml"} {
		_, err := ParseStackConfig(path, []byte("config:\n  rig:owner: alice\n"))
		if !errors.Is(err, ErrStackConfig) || !errors.Is(err, inventory.ErrBadName) || !strings.Contains(err.Error(), path) ||
			!strings.Contains(err.Error(), "want a letter or digit") {
			t.Errorf("%s: got %v", path, err)
		}
		if _, err := ReadStackConfig(path); !errors.Is(err, inventory.ErrBadName) {
			t.Errorf("ReadStackConfig(%s): want the name refused before reading, got %v", path, err)
		}
	}
	if sc, err := ParseStackConfig("dir/Pulumi.dev-1.yaml", []byte("config:\n")); err != nil || sc.Stack != "dev-1" {
		t.Fatalf("%+v %v", sc, err)
	}
}

// An empty rig:dataVolumes is refused where it stands (it would quietly mean the volume* keys'
// one default volume), and a dataVolumes of the wrong shape is shown a dataVolumes example, not
// another key's CIDR.
func TestStackConfigDataVolumesShape(t *testing.T) {
	for _, c := range []struct{ line, pos, want string }{
		{"rig:dataVolumes: []", "Pulumi.t.yaml:2:20", `at least one item, e.g. ["gp3-1000 type=gp3 size=200 iops=4000 throughput=1000"]`},
		{"rig:dataVolumes: {a: b}", "Pulumi.t.yaml:2:20", `a YAML list of strings, e.g. ["gp3-1000 type=gp3 size=200 iops=4000 throughput=1000"]`},
		{"rig:dataVolumes: gp3-1000 type=gp3", "Pulumi.t.yaml:2:20", `pulumi config set --path 'dataVolumes[0]' "gp3-1000 type=gp3`},
	} {
		sc, err := ParseStackConfig("Pulumi.t.yaml", []byte("config:\n  "+c.line+"\n"))
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		_, ps := sc.Spec()
		got := ps.Field("dataVolumes").Errors()
		if len(got) != 1 || got[0].Pos != c.pos || !strings.Contains(got[0].String(), c.want) || strings.Contains(got[0].String(), "203.0.113") {
			t.Errorf("%s: problems %v; want one at %s saying %q", c.line, got, c.pos, c.want)
		}
	}
	for _, k := range Keys {
		if k.Type == TypeArray && k.Example == "" {
			t.Errorf("array key %s has no Example: its shape errors would show none", k.Name)
		}
	}
	// Leaving the key out keeps the default volume, without a word.
	sc, err := ParseStackConfig("Pulumi.t.yaml", []byte("config:\n  rig:owner: alice\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s, ps := sc.Spec(); len(ps.Field("dataVolumes")) != 0 || len(s.Volumes()) != 1 || s.Volumes()[0].Name != DefaultVolumeName {
		t.Errorf("no dataVolumes: problems %v, volumes %+v; want the default volume", ps.Field("dataVolumes"), s.Volumes())
	}
}
