package spec

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestDataVolumesFromStackConfig(t *testing.T) {
	sc, err := ReadStackConfig("testdata/Pulumi.two-volumes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, ps := sc.Spec()
	if len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	vols := s.Volumes()
	if len(vols) != 2 {
		t.Fatalf("volumes %+v", vols)
	}
	want := []struct {
		name, dev        string
		iops, throughput int
	}{{"gp3-125", "/dev/sdf", 3000, 125}, {"gp3-1000", "/dev/sdg", 4000, 1000}}
	for i, w := range want {
		v := vols[i]
		if v.Name != w.name || v.Device != w.dev || v.Type != VolumeGP3 || v.Size != 200 || v.IOPS != w.iops || v.Throughput != w.throughput {
			t.Errorf("volume %d: %+v, want %+v", i, v, w)
		}
	}
	// As the Pulumi engine hands them to the program: every key, the defaults of Pulumi.yaml too.
	raw := map[string]string{"dataVolumes": `["gp3-125 type=gp3 size=200 iops=3000 throughput=125"]`}
	for _, k := range legacyVolumeKeys {
		key, _ := KeyByName(k)
		raw[k] = fmt.Sprint(key.Default)
	}
	if _, ps := FromConfig("t", "us-east-1", raw); len(ps) != 0 {
		t.Fatalf("volume keys at their defaults beside dataVolumes: %v", ps)
	}
	// Without the list, the four volume keys are the one volume, named data, at /dev/sdf.
	one := validSpec().Volumes()
	if len(one) != 1 || one[0].Name != DefaultVolumeName || one[0].Device != "/dev/sdf" || one[0].Field("iops") != "volumeIops" {
		t.Fatalf("default volume %+v", one)
	}
}

func TestDataVolumesParseProblems(t *testing.T) {
	cases := []struct {
		name  string
		raw   map[string]string
		field string
		want  string
	}{
		{"missing throughput", map[string]string{"dataVolumes": `["a type=gp3 size=200 iops=3000"]`}, "dataVolumes[0].throughput", "(missing)"},
		{"io2 with throughput", map[string]string{"dataVolumes": `["a type=gp3 size=200 iops=3000 throughput=125", "b type=io2 size=100 iops=5000 throughput=500"]`},
			"dataVolumes[1].throughput", "io2 provisions IOPS only"},
		{"bad number", map[string]string{"dataVolumes": `["a type=gp3 size=big iops=3000 throughput=125"]`}, "dataVolumes[0].size", "a whole number"},
		{"unknown setting", map[string]string{"dataVolumes": `["a type=gp3 size=1 iops=3000 throughput=125 speed=9"]`}, "dataVolumes[0]", "speed=9"},
		{"name as path", map[string]string{"dataVolumes": `["../x type=gp3 size=200 iops=3000 throughput=125"]`}, "dataVolumes[0]", "mount point"},
		{"duplicate name", map[string]string{"dataVolumes": `["a type=gp3 size=200 iops=3000 throughput=125", "a type=gp3 size=200 iops=3000 throughput=125"]`},
			"dataVolumes[1]", "dataVolumes[0] is named a too"},
		{"with a legacy key", map[string]string{"volumeIops": "5000", "dataVolumes": `["a type=gp3 size=200 iops=3000 throughput=125"]`}, "volumeIops", "remove volumeIops"},
		{"too many", map[string]string{"dataVolumes": `["a type=gp3 size=9 iops=3000 throughput=125","b type=gp3 size=9 iops=3000 throughput=125","c type=gp3 size=9 iops=3000 throughput=125","d type=gp3 size=9 iops=3000 throughput=125","e type=gp3 size=9 iops=3000 throughput=125","f type=gp3 size=9 iops=3000 throughput=125","g type=gp3 size=9 iops=3000 throughput=125","h type=gp3 size=9 iops=3000 throughput=125","i type=gp3 size=9 iops=3000 throughput=125","j type=gp3 size=9 iops=3000 throughput=125","k type=gp3 size=9 iops=3000 throughput=125","l type=gp3 size=9 iops=3000 throughput=125"]`},
			"dataVolumes", "at most 11"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ps := FromConfig("t", "us-east-1", c.raw)
			got := ps.Field(c.field)
			if len(got) == 0 || !strings.Contains(got[0].String(), c.want) {
				t.Fatalf("problems on %s: %v (all: %v), want one saying %q", c.field, got, ps, c.want)
			}
		})
	}
}

// Each listed volume is held to its type's rules under its own field.
func TestDataVolumesEachValidated(t *testing.T) {
	s := validSpec()
	s.DataVolumes = mustVolumes(t, "a type=gp3 size=200 iops=3000 throughput=125", "b type=gp3 size=200 iops=3199 throughput=800",
		"c type=io2 size=50 iops=70000", "d type=st1 size=100 iops=1")
	ps := Validate(s)
	for field, want := range map[string]string{
		"dataVolumes[1].throughput": "raise dataVolumes[1].iops to at least 3,200",
		"dataVolumes[2].iops":       "<= 50,000 on 50 GiB",
		"dataVolumes[3].type":       "gp3 or io2",
	} {
		got := ps.Field(field)
		if len(got) != 1 || got[0].Severity != SeverityError || !strings.Contains(got[0].String(), want) {
			t.Errorf("%s: %v, want one error saying %q", field, got, want)
		}
	}
	if got := ps.Field("dataVolumes[0].throughput"); len(got) != 0 {
		t.Errorf("a valid volume has problems: %v", got)
	}
}

// The set is held against the instance's EBS bandwidth: what one volume passes, two may not.
// c7i.4xlarge: 5,000/10,000 Mbps (625/1,250 MB/s) and 20,000/40,000 IOPS (infra/spec/instances.go).
func TestDataVolumeSetAgainstInstanceEBS(t *testing.T) {
	c7i := func(vols ...string) Problems {
		s := validSpec()
		s.ServerInstanceType, s.ClientInstanceType = "c7i.4xlarge", "c7i.4xlarge"
		s.DataVolumes = mustVolumes(t, vols...)
		return Validate(s).Field("dataVolumes")
	}
	// One 1,000 MiB/s volume fits under the maximum (a warning above the baseline); two do not.
	ps := c7i("a type=gp3 size=200 iops=4000 throughput=500", "b type=gp3 size=200 iops=4000 throughput=1000")
	if len(ps) != 1 || ps[0].Severity != SeverityError {
		t.Fatalf("two volumes of 1,500 MiB/s on c7i.4xlarge: %v", ps)
	}
	for _, want := range []string{"rig:dataVolumes", "a 500 + b 1,000", "1,500 MiB/s, 1,573 MB/s", "<= 1,250 MB/s on c7i.4xlarge (its EBS maximum)", "serverInstanceType is c7i.4xlarge"} {
		if !strings.Contains(ps[0].String(), want) {
			t.Errorf("%s\nlacks %q", ps[0], want)
		}
	}
	// IOPS add up too: 30,000 + 16,000 > 40,000.
	ps = c7i("a type=gp3 size=200 iops=30000 throughput=125", "b type=io2 size=100 iops=16000")
	if len(ps) != 1 || ps[0].Severity != SeverityError || !strings.Contains(ps[0].String(), "IOPS a 30,000 + b 16,000 (46,000)") ||
		!strings.Contains(ps[0].String(), "<= 40,000 on c7i.4xlarge (its EBS maximum IOPS)") {
		t.Fatalf("46,000 IOPS on c7i.4xlarge: %v", ps)
	}
	// Above the baseline and within the maximum: a warning that says the burst runs out.
	ps = c7i("a type=gp3 size=200 iops=3000 throughput=125", "b type=gp3 size=200 iops=3000 throughput=500")
	if len(ps) != 1 || ps[0].Severity != SeverityWarning || !strings.Contains(ps[0].String(), "<= 625 MB/s sustained") {
		t.Fatalf("655 MB/s on c7i.4xlarge: %v", ps)
	}
	// Within the baseline: nothing.
	if ps = c7i("a type=gp3 size=200 iops=3000 throughput=125", "b type=gp3 size=200 iops=3000 throughput=250"); len(ps) != 0 {
		t.Fatalf("393 MB/s on c7i.4xlarge: %v", ps)
	}
}

func TestDataVolumesCostAndPlan(t *testing.T) {
	s := validSpec()
	s.ServerInstanceType, s.ClientInstanceType = "c7i.4xlarge", "c7i.large"
	s.DataVolumes = mustVolumes(t, "gp3-125 type=gp3 size=200 iops=3000 throughput=125", "gp3-1000 type=gp3 size=100 iops=4000 throughput=1000")
	e, err := EstimateCost(s)
	if err != nil {
		t.Fatal(err)
	}
	// As TestEstimateByHand, with 3 servers x (200 + 100) GB, 3 x 1,000 IOPS and 3 x 875 MiB/s
	// above the free baseline (the 125 MiB/s volume pays only for its storage).
	want := 3*0.714 + 0.08925 + 4*0.005 + (900+120)*0.08/730 + 3000*0.005/730 + 2625*0.04/730
	if math.Abs(e.Hourly-want) > 1e-9 {
		t.Fatalf("hourly %.6f, want %.6f: %+v", e.Hourly, want, e.Lines)
	}
	var items []string
	for _, l := range e.Lines {
		items = append(items, l.Item)
	}
	if !strings.Contains(strings.Join(items, "|"), "volume gp3-125: gp3 data volume storage|volume gp3-1000: gp3 data volume storage") {
		t.Errorf("lines %q", items)
	}
	var b bytes.Buffer
	if err := WritePlan(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"data volume gp3-125 per server (clients: root volume only; rig:clientDataVolume adds the same): gp3 200 GiB, 3,000 IOPS, 125 MiB/s, encrypted, attached at /dev/sdf",
		"data volume gp3-1000 per server (clients: root volume only; rig:clientDataVolume adds the same): gp3 100 GiB, 4,000 IOPS, 1,000 MiB/s, encrypted, attached at /dev/sdg",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}

func mustVolumes(t *testing.T, items ...string) []DataVolume {
	t.Helper()
	raw := `["` + strings.Join(items, `","`) + `"]`
	vols, ps := parseDataVolumes(map[string]string{"dataVolumes": raw})
	if len(ps) != 0 {
		t.Fatalf("parse %s: %v", raw, ps)
	}
	return vols
}

// A problem with a dataVolumes item points at the item in the stack config (line and
// column), a setting given twice is refused rather than the last winning, and a unit other than
// the setting's own (size in GiB, throughput in MiB/s, iops none) is refused rather than ignored.
func TestDataVolumeItemProblemsSayWhere(t *testing.T) {
	const head = "config:\n  aws:region: us-east-1\n  rig:dataVolumes:\n"
	cases := []struct {
		name, item, field, want string
	}{
		{"name as path", `"../x"`, "dataVolumes[0]", `rig:dataVolumes[0] = "../x"`},
		{"missing throughput", `"a type=gp3 size=200 iops=3000"`, "dataVolumes[0].throughput", "(missing)"},
		{"bad number", `"a type=gp3 size=big iops=3000 throughput=125"`, "dataVolumes[0].size", "a whole number"},
		{"unknown setting", `"a type=gp3 size=200 iops=3000 throughput=125 speed=9"`, "dataVolumes[0]", "speed=9"},
		{"bad type", `"a type=st1 size=200 iops=3000 throughput=125"`, "dataVolumes[0].type", "gp3 or io2"},
		{"size range", `"a type=gp3 size=0 iops=3000 throughput=125"`, "dataVolumes[0].size", "GiB for gp3"},
		{"iops range", `"a type=gp3 size=200 iops=1 throughput=125"`, "dataVolumes[0].iops", "for gp3"},
		{"throughput range", `"a type=gp3 size=200 iops=3000 throughput=2000"`, "dataVolumes[0].throughput", "125-1,000 MiB/s"},
		{"io2 throughput", `"a type=io2 size=200 iops=3000 throughput=125"`, "dataVolumes[0].throughput", "io2 provisions IOPS only"},
		{"size twice", `"a type=gp3 size=200 size=9 iops=3000 throughput=125"`, "dataVolumes[0].size", `size= is given twice`},
		{"type twice", `"a type=gp3 type=io2 size=200 iops=3000 throughput=125"`, "dataVolumes[0].type", `type= is given twice`},
		{"size in MiB/s", `"a type=gp3 size=200MiB/s iops=3000 throughput=125"`, "dataVolumes[0].size", "MiB/s is not a unit of size"},
		{"throughput in GiB", `"a type=gp3 size=200 iops=3000 throughput=125GiB"`, "dataVolumes[0].throughput", "GiB is not a unit of throughput"},
		{"iops with a unit", `"a type=gp3 size=200 iops=3k throughput=125"`, "dataVolumes[0].iops", "without a unit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, style := range []struct{ list, at string }{
				{"    - " + c.item + "\n", "Pulumi.t.yaml:4:7"}, // block list
				{"    [" + c.item + "]\n", "Pulumi.t.yaml:4:6"}, // flow list
			} {
				sc, err := ParseStackConfig("Pulumi.t.yaml", []byte(head+style.list))
				if err != nil {
					t.Fatal(err)
				}
				_, ps := sc.Spec()
				got := ps.Field(c.field)
				if len(got) == 0 || !strings.Contains(got[0].String(), c.want) {
					t.Fatalf("problems on %s: %v (all: %v), want one saying %q", c.field, got, ps, c.want)
				}
				if got[0].Pos != style.at {
					t.Errorf("%s at %q, want %s (the item)", got[0], got[0].Pos, style.at)
				}
			}
		})
	}
	// The second item's problem points at the second item.
	sc, err := ParseStackConfig("Pulumi.t.yaml", []byte(head+"    - a type=gp3 size=200 iops=3000 throughput=125\n    - b type=gp3 size=200 iops=3000 throughput=125 iops=4000\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, ps := sc.Spec()
	if got := ps.Field("dataVolumes[1].iops"); len(got) == 0 || got[0].Pos != "Pulumi.t.yaml:5:7" {
		t.Errorf("second item's duplicate iops: %v (all %v); want it at Pulumi.t.yaml:5:7", got, ps)
	}
}
