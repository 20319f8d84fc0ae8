package cluster

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"golang.org/x/crypto/ssh"

	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/infra/hostkey"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/inventory"
)

const (
	ssmAMI      = "ami-0ssm0000000000001"
	testSeed    = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	tokInstance = "aws:ec2/instance:Instance"
	tokVolume   = "aws:ebs/volume:Volume"
	tokAttach   = "aws:ec2/volumeAttachment:VolumeAttachment"
	tokPG       = "aws:ec2/placementGroup:PlacementGroup"
	tokSG       = "aws:ec2/securityGroup:SecurityGroup"
	tokBucket   = "aws:s3/bucketV2:BucketV2"
	tokPAB      = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
	tokSSE      = "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2"
	tokLife     = "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2"
	tokKey      = "aws:ec2/keyPair:KeyPair"
	tokVPC      = "aws:ec2/vpc:Vpc"
	tokSubnet   = "aws:ec2/subnet:Subnet"
	tokIGW      = "aws:ec2/internetGateway:InternetGateway"
	tokRoute    = "aws:ec2/route:Route"
	tokRTA      = "aws:ec2/routeTableAssociation:RouteTableAssociation"
)

// Resource types AWS cannot tag; every other registered resource must carry the rig's tags.
var untaggable = map[string]bool{
	tokAttach: true, tokRoute: true, tokPAB: true, tokSSE: true, tokLife: true,
	tokRTA: true,
}

type registered struct {
	typ, name, id string
	inputs        resource.PropertyMap
	outputs       resource.PropertyMap
	retain        bool
	ignore        []string
	deps          []string // URNs of explicit dependencies
	dbr           bool     // deleteBeforeReplace
	deletedWith   string   // URN
}

// mocks answers the AMI and SSM invokes and fails on any other token; it records every resource.
type mocks struct {
	mu        sync.Mutex
	resources []registered
	invokes   []string
	amiArch   string
	// secretSSM makes the SSM parameter's value a secret, as the provider may return it.
	secretSSM bool
}

func (m *mocks) NewResource(a pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := a.Inputs.Copy()
	id := a.Name + "-id"
	switch a.TypeToken {
	case tokInstance:
		n := len(m.byType(tokInstance))
		out["publicIp"] = resource.NewStringProperty(fmt.Sprintf("198.51.100.%d", 10+n))
		out["privateIp"] = resource.NewStringProperty(fmt.Sprintf("10.42.1.%d", 10+n))
		id = "i-" + a.Name
	case tokVolume:
		id = "vol-" + a.Name
	case tokPG:
		out["name"] = resource.NewStringProperty(a.Name + "-7f3a")
	case tokKey:
		out["keyName"] = resource.NewStringProperty(a.Name + "-5d1c")
	case tokBucket:
		out["bucket"] = resource.NewStringProperty(a.Inputs["bucketPrefix"].StringValue() + "20250601")
		id = out["bucket"].StringValue()
	}
	r := registered{typ: a.TypeToken, name: a.Name, id: id, inputs: a.Inputs, outputs: out}
	if a.RegisterRPC != nil {
		r.retain = a.RegisterRPC.GetRetainOnDelete()
		r.ignore = a.RegisterRPC.GetIgnoreChanges()
		r.deps = a.RegisterRPC.GetDependencies()
		r.dbr = a.RegisterRPC.GetDeleteBeforeReplace()
		r.deletedWith = a.RegisterRPC.GetDeletedWith()
	}
	m.resources = append(m.resources, r)
	return id, out, nil
}

func (m *mocks) Call(a pulumi.MockCallArgs) (resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.invokes = append(m.invokes, a.Token)
	switch a.Token {
	case "aws:ssm/getParameter:getParameter":
		name := a.Args["name"].StringValue()
		value := resource.NewStringProperty(ssmAMI)
		if m.secretSSM {
			value = resource.MakeSecret(value)
		}
		return resource.PropertyMap{
			"name": resource.NewStringProperty(name), "type": resource.NewStringProperty("String"),
			"value": value, "insecureValue": resource.NewStringProperty(ssmAMI),
			"id": resource.NewStringProperty(name), "arn": resource.NewStringProperty("arn:aws:ssm:::parameter" + name),
			"version": resource.NewNumberProperty(1),
		}, nil
	case "aws:ec2/getAmi:getAmi":
		f := a.Args["filters"].ArrayValue()[0].ObjectValue()
		id := f["values"].ArrayValue()[0].StringValue()
		return resource.PropertyMap{
			"id": resource.NewStringProperty(id), "imageId": resource.NewStringProperty(id),
			"architecture": resource.NewStringProperty(m.amiArch), "rootDeviceName": resource.NewStringProperty("/dev/xvda"),
		}, nil
	}
	return nil, fmt.Errorf("unexpected invoke %s", a.Token)
}

func (m *mocks) byType(typ string) []registered {
	var out []registered
	for _, r := range m.resources {
		if r.typ == typ {
			out = append(out, r)
		}
	}
	return out
}

func (m *mocks) named(t *testing.T, typ, name string) registered {
	t.Helper()
	for _, r := range m.resources {
		if r.typ == typ && r.name == name {
			return r
		}
	}
	t.Fatalf("no %s named %s", typ, name)
	return registered{}
}

func (m *mocks) one(t *testing.T, typ string) registered {
	t.Helper()
	rs := m.byType(typ)
	if len(rs) != 1 {
		t.Fatalf("want one %s, got %d", typ, len(rs))
	}
	return rs[0]
}

func operatorKey(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ssh.NewPublicKey(pub)
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

func baseSpec(t *testing.T) Spec {
	return Spec{
		Stack: "dev", Region: "us-east-1", AvailabilityZone: "us-east-1b",
		ServerInstanceType: "c6in.16xlarge", ClientInstanceType: "c6in.4xlarge", Servers: 3, Clients: 1,
		AMIFamily: spec.FamilyAL2023, VolumeType: spec.VolumeGP3, VolumeSize: 200, VolumeIOPS: 4000, VolumeThroughput: 1000,
		RootVolumeSize: 30, OperatorCIDRs: []string{"203.0.113.7/32"}, PublicKey: operatorKey(t), Owner: "alice",
		ExpiresInHours: 8, RetainBucket: true, ClientInPlacementGroup: true, ResultsExpireDays: 30, CreatedAt: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), HostKeySeed: testSeed,
	}
}

// deploy runs Deploy under the mocks and returns what it registered and the decoded inventory.
func deploy(t *testing.T, s Spec, arch string) (*mocks, *inventory.Inventory, error) {
	t.Helper()
	m, inv, _, err := deployWith(t, s, &mocks{amiArch: arch})
	return m, inv, err
}

// deployWith also returns every stack output, resolved, as JSON text.
func deployWith(t *testing.T, s Spec, m *mocks) (*mocks, *inventory.Inventory, string, error) {
	t.Helper()
	invCh := make(chan map[string]any, 1)
	allCh := make(chan string, 1)
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		out, err := Deploy(ctx, s, Options{})
		if err != nil {
			return err
		}
		out.Export(ctx, s)
		out.Inventory.ApplyT(func(v map[string]any) error { invCh <- v; return nil })
		pulumi.All(out.Inventory, out.Bucket, out.ExpiresAt, out.PlacementGroup).ApplyT(func(v []any) error {
			b, err := json.Marshal(v)
			allCh <- string(b)
			return err
		})
		return nil
	}, pulumi.WithMocks("rig", s.Stack, m))
	if err != nil {
		return m, nil, "", err
	}
	select {
	case v := <-invCh:
		b, _ := json.Marshal(v)
		var inv inventory.Inventory
		if err := json.Unmarshal(b, &inv); err != nil {
			t.Fatalf("inventory output does not decode: %v", err)
		}
		return m, &inv, <-allCh, nil
	case <-time.After(10 * time.Second):
		t.Fatal("inventory output never resolved")
	}
	return nil, nil, "", nil
}

func TestDeployTable(t *testing.T) {
	cases := []struct {
		name string
		mut  func(*Spec)
		arch string
	}{
		{"defaults (gp3 data volumes)", func(*Spec) {}, ""},
		{"client data volume, capacity reservations per role, no results expiry", func(s *Spec) {
			s.ClientDataVolume, s.ResultsExpireDays = true, 0
			s.ServerCapacityReservationID, s.ClientCapacityReservationID = "cr-0123456789abcdef0", "cr-0fedcba9876543210"
		}, ""},
		{"servers reserved, clients outside the placement group", func(s *Spec) {
			s.ServerCapacityReservationID, s.ClientInPlacementGroup, s.Clients = "cr-0123456789abcdef0", false, 2
		}, ""},
		{"io2 ubuntu v4+v6 operators, bucket deleted with stack", func(s *Spec) {
			s.ServerInstanceType, s.ClientInstanceType, s.Servers, s.Clients = "c7i.8xlarge", "c7i.xlarge", 5, 2
			s.VolumeType, s.VolumeIOPS, s.VolumeSize = spec.VolumeIO2, 20000, 100
			s.AMIFamily, s.RetainBucket = spec.FamilyUbuntu, false
			s.OperatorCIDRs = []string{"203.0.113.0/28", "2001:db8:1::/48"}
		}, ""},
		{"two data volumes per server and client (gp3 at 125 and 1,000 MiB/s), one io2", func(s *Spec) {
			s.ClientDataVolume, s.ServerInstanceType, s.ClientInstanceType = true, "c6in.16xlarge", "c6in.16xlarge"
			s.DataVolumes = dataVolumes(t, "gp3-125 type=gp3 size=200 iops=3000 throughput=125",
				"gp3-1000 type=gp3 size=200 iops=4000 throughput=1000", "io2-16k type=io2 size=100 iops=16000")
		}, ""},
		{"reused network, explicit AMI", func(s *Spec) {
			s.VPCID, s.SubnetID, s.AMI, s.Servers = "vpc-0123456789abcdef0", "subnet-0123456789abcdef0", "ami-0123456789abcdef0", 1
		}, "x86_64"},
		{"multi-az: spread group, client in node-0's AZ", func(s *Spec) { s.Placement, s.AvailabilityZone = spec.PlacementMultiAZ, "us-east-1a" }, ""},
		{"multi-az: five servers in a partition group, AZs given, client with node-2, outside the group", func(s *Spec) {
			s.Placement, s.PlacementStrategy, s.Servers, s.Clients = spec.PlacementMultiAZ, spec.StrategyPartition, 5, 2
			s.AvailabilityZones, s.AvailabilityZone = []string{"us-east-1d", "us-east-1b", "us-east-1f"}, "us-east-1d"
			s.ClientAvailabilityZone, s.ClientInPlacementGroup = "node-2", false
		}, ""},
		{"multi-az: no placement group, client reserved", func(s *Spec) {
			s.Placement, s.PlacementStrategy, s.AvailabilityZone = spec.PlacementMultiAZ, spec.StrategyNone, "us-east-1a"
			s.ClientCapacityReservationID, s.ClientAvailabilityZone = "cr-0fedcba9876543210", "us-east-1c"
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := baseSpec(t)
			c.mut(&s)
			m, inv, err := deploy(t, s, c.arch)
			if err != nil {
				t.Fatal(err)
			}
			checkDeployment(t, s, m, inv)
			checkInventoryVolumes(t, s, inv)
		})
	}
}

func checkDeployment(t *testing.T, s Spec, m *mocks, inv *inventory.Inventory) {
	t.Helper()
	nodes := s.Nodes()

	// One placement group of the spec's strategy holds the instances (none with strategy none):
	// a cluster group in one AZ, a rack-level spread or a partition group across AZs.
	pgName := ""
	switch strategy := s.GroupStrategy(); strategy {
	case spec.StrategyNone:
		if pgs := m.byType(tokPG); len(pgs) != 0 {
			t.Errorf("placement strategy none, but %d placement groups", len(pgs))
		}
	default:
		pg := m.one(t, tokPG)
		in := pg.inputs
		if got := in["strategy"].StringValue(); got != strategy {
			t.Errorf("placement strategy %q, want %q", got, strategy)
		}
		wantLevel, wantPartitions := "", 0.0
		switch strategy {
		case spec.StrategySpread:
			wantLevel = "rack"
		case spec.StrategyPartition:
			wantPartitions = spec.PartitionCount
		}
		if in["spreadLevel"].HasValue() != (wantLevel != "") || (wantLevel != "" && in["spreadLevel"].StringValue() != wantLevel) ||
			in["partitionCount"].HasValue() != (wantPartitions != 0) || (wantPartitions != 0 && in["partitionCount"].NumberValue() != wantPartitions) {
			t.Errorf("placement group %v, want spread level %q, %v partitions", in, wantLevel, wantPartitions)
		}
		pgName = pg.name + "-7f3a"
	}
	// A subnet per AZ of the stack, each carved from the VPC's CIDR, each routed to the gateway.
	subnetOf := map[string]string{}
	if s.SubnetID == "" {
		vpc := m.one(t, tokVPC)
		zones := s.Zones()
		cidrs, _ := spec.SubnetCIDRs(spec.VPCCIDR, len(zones))
		subnets := m.byType(tokSubnet)
		if len(subnets) != len(zones) || vpc.inputs["cidrBlock"].StringValue() != spec.VPCCIDR {
			t.Fatalf("%d subnets for zones %v, VPC %v", len(subnets), zones, vpc.inputs["cidrBlock"])
		}
		rtas := m.byType(tokRTA)
		for i := range zones {
			name := "rig-subnet" // the single-az stack's name stays
			if i > 0 {
				name = fmt.Sprintf("rig-subnet-%d", i)
			}
			sn := m.named(t, tokSubnet, name)
			az, cidr := sn.inputs["availabilityZone"].StringValue(), sn.inputs["cidrBlock"].StringValue()
			if az != zones[i] || cidr != cidrs[i] || sn.inputs["vpcId"].StringValue() != vpc.id {
				t.Errorf("subnet %s: %s %s, want %s %s", sn.name, az, cidr, zones[i], cidrs[i])
			}
			subnetOf[az] = sn.id
			if !slices.ContainsFunc(rtas, func(r registered) bool { return r.inputs["subnetId"].StringValue() == sn.id }) {
				t.Errorf("subnet %s has no route table association", sn.name)
			}
		}
		if len(rtas) != len(zones) {
			t.Errorf("%d route table associations, want %d", len(rtas), len(zones))
		}
		m.one(t, tokIGW)
		route := m.one(t, tokRoute)
		if route.inputs["destinationCidrBlock"].StringValue() != "0.0.0.0/0" || route.inputs["gatewayId"].StringValue() != m.one(t, tokIGW).id {
			t.Errorf("default route %v", route.inputs)
		}
	} else {
		subnetOf[s.AvailabilityZone] = s.SubnetID
		for _, typ := range []string{tokVPC, tokSubnet, tokIGW, tokRoute} {
			if len(m.byType(typ)) != 0 {
				t.Errorf("reused network, but %s was created", typ)
			}
		}
	}
	insts := m.byType(tokInstance)
	if len(insts) != len(nodes) {
		t.Fatalf("%d instances, want %d", len(insts), len(nodes))
	}
	wantAMI := ssmAMI
	if s.AMI != "" {
		wantAMI = s.AMI
	}
	sg := m.one(t, tokSG)
	for _, n := range nodes {
		r := m.named(t, tokInstance, n.Name)
		in := r.inputs
		if in["instanceType"].StringValue() != n.InstanceType {
			t.Errorf("instance %s: %s, want %s", r.name, in["instanceType"].StringValue(), n.InstanceType)
		}
		wantPG := pgName
		if n.Role == "client" && !s.ClientInPlacementGroup {
			wantPG = ""
		}
		if n.Zone == "" || !slices.Contains(s.Zones(), n.Zone) {
			t.Errorf("%s: zone %q is not one of the stack's %v", n.Name, n.Zone, s.Zones())
		}
		if pgIn := in["placementGroup"]; (wantPG == "" && pgIn.HasValue()) || (wantPG != "" && pgIn.StringValue() != wantPG) {
			t.Errorf("%s: placement group %v, want %q", r.name, pgIn, wantPG)
		}
		// The clients are launched after every server: each client depends on each server.
		for _, other := range nodes {
			dep := slices.ContainsFunc(r.deps, func(u string) bool { return strings.HasSuffix(u, "::"+other.Name) })
			if want := n.Role == "client" && other.Role == "server"; dep != want {
				t.Errorf("%s depends on %s: %v, want %v (deps %v)", r.name, other.Name, dep, want, r.deps)
			}
		}
		// Launched only once its subnet routes to the internet (cloud-init's package step needs
		// it), and so terminated before the route and the gateway on destroy.
		if s.SubnetID == "" {
			rta := "rig-rta"
			if i := slices.Index(s.Zones(), n.Zone); i > 0 {
				rta = fmt.Sprintf("rig-rta-%d", i)
			}
			for _, want := range []string{rta, "rig-default-route", "rig-igw"} {
				if !slices.ContainsFunc(r.deps, func(u string) bool { return strings.HasSuffix(u, "::"+want) }) {
					t.Errorf("%s (in %s) does not depend on %s: %v", r.name, n.Zone, want, r.deps)
				}
			}
		}
		if in["availabilityZone"].StringValue() != n.Zone || in["subnetId"].StringValue() != subnetOf[n.Zone] {
			t.Errorf("%s: az %s subnet %s", r.name, in["availabilityZone"].StringValue(), in["subnetId"].StringValue())
		}
		if !in["ebsOptimized"].BoolValue() || in["ami"].StringValue() != wantAMI {
			t.Errorf("%s: ebsOptimized %v ami %s", r.name, in["ebsOptimized"], in["ami"].StringValue())
		}
		if sgs := in["vpcSecurityGroupIds"].ArrayValue(); len(sgs) != 1 || sgs[0].StringValue() != sg.id {
			t.Errorf("%s: security groups %v", r.name, sgs)
		}
		if !slices.Contains(r.ignore, "ami") {
			t.Errorf("%s: a newer image would replace the instance (ignoreChanges %v)", r.name, r.ignore)
		}
		// The host key travels in secret user data and matches the inventory.
		ud := in["userData"]
		if !ud.IsSecret() {
			t.Errorf("%s: user data is not secret", r.name)
		}
		key, _ := hostkey.Derive(s.HostKeySeed, s.Stack, n.Name)
		if !strings.Contains(ud.SecretValue().Element.StringValue(), key.Public) ||
			!strings.Contains(ud.SecretValue().Element.StringValue(), "ed25519_private") ||
			!strings.Contains(ud.SecretValue().Element.StringValue(), "\npackages:\n  - fio\n") {
			t.Errorf("%s: user data does not install the derived host key and fio", r.name)
		}
		// Root volume: gp3, encrypted, deleted with the instance, tagged.
		root := in["rootBlockDevice"].ObjectValue()
		if !root["encrypted"].BoolValue() || int(root["volumeSize"].NumberValue()) != s.RootVolumeSize ||
			root["volumeType"].StringValue() != "gp3" || !root["deleteOnTermination"].BoolValue() {
			t.Errorf("%s: root volume %v", r.name, root)
		}
		for k, v := range s.Tags() {
			if got := root["tags"].ObjectValue()[resource.PropertyKey(k)]; !got.IsString() || got.StringValue() != v {
				t.Errorf("%s: root volume tag %s = %v, want %s", r.name, k, got, v)
			}
		}
		// IMDSv2 only: the metadata endpoint answers only with a session token.
		md := in["metadataOptions"].ObjectValue()
		if md["httpTokens"].StringValue() != "required" || md["httpEndpoint"].StringValue() != "enabled" {
			t.Errorf("%s: metadata options %v, want httpTokens required", r.name, md)
		}
		if in["keyName"].StringValue() != "rig-key-5d1c" {
			t.Errorf("%s: key %v", r.name, in["keyName"])
		}
		// A reservation matches one instance type: each role launches into its own.
		wantCR := s.ServerCapacityReservationID
		if n.Role == "client" {
			wantCR = s.ClientCapacityReservationID
		}
		cr, has := in["capacityReservationSpecification"]
		switch {
		case wantCR == "" && has && !cr.IsNull():
			t.Errorf("%s: capacity reservation %v, want none for its role", r.name, cr)
		case wantCR != "" && (!has || cr.ObjectValue()["capacityReservationTarget"].ObjectValue()["capacityReservationId"].StringValue() != wantCR):
			t.Errorf("%s: capacity reservation %v, want %s", r.name, cr, wantCR)
		}
	}

	// The key pair holds the operator's public key, nothing else.
	kp := m.one(t, tokKey)
	if kp.inputs["publicKey"].StringValue() != s.PublicKey {
		t.Errorf("key pair public key %v", kp.inputs["publicKey"])
	}
	for k := range kp.inputs {
		if k != "publicKey" && k != "tags" && k != "__defaults" {
			t.Errorf("key pair input %s", k)
		}
	}

	// Every data volume of every server (and of every client only when asked), as specified,
	// each attached at a device name of its own to its own node, declared so that a destroy never
	// detaches it (SkipDestroy), and created before its instance, so the instance is terminated
	// before the volume is deleted.
	specVols := s.Volumes()
	vols := m.byType(tokVolume)
	atts := m.byType(tokAttach)
	if want := s.NodesWithData() * len(specVols); len(vols) != want || len(atts) != want {
		t.Fatalf("%d volumes, %d attachments, want %d", len(vols), len(atts), want)
	}
	for _, n := range nodes {
		if !n.DataVolume {
			for _, v := range vols {
				if strings.HasPrefix(v.name, n.Name+"-data") {
					t.Errorf("%s got a data volume without rig:clientDataVolume", n.Name)
				}
			}
			continue
		}
		devices := map[string]bool{}
		for _, sv := range specVols {
			name := volumeName(s, n.Name, sv.Name)
			v := m.named(t, tokVolume, name)
			in := v.inputs
			if in["type"].StringValue() != sv.Type || int(in["size"].NumberValue()) != sv.Size ||
				int(in["iops"].NumberValue()) != sv.IOPS || !in["encrypted"].BoolValue() ||
				in["availabilityZone"].StringValue() != n.Zone {
				t.Errorf("volume %s: %v", v.name, in)
			}
			thr, has := in["throughput"]
			switch {
			case sv.Type == spec.VolumeGP3 && (!has || int(thr.NumberValue()) != sv.Throughput):
				t.Errorf("volume %s: throughput %v, want %d", v.name, thr, sv.Throughput)
			case sv.Type == spec.VolumeIO2 && has && !thr.IsNull():
				t.Errorf("volume %s: io2 must not set throughput, got %v", v.name, thr)
			}
			a := m.named(t, tokAttach, name)
			dev := a.inputs["deviceName"].StringValue()
			if dev != sv.Device || devices[dev] ||
				a.inputs["instanceId"].StringValue() != "i-"+n.Name || a.inputs["volumeId"].StringValue() != "vol-"+name {
				t.Errorf("attachment %s: %v (devices of %s so far: %v)", a.name, a.inputs, n.Name, devices)
			}
			devices[dev] = true
			// Replaced delete-first (a real detach, after rig up's unmount); deleted with its
			// instance on destroy (no DetachVolume); never left attached (skipDestroy: the
			// volume is not kept).
			if !a.dbr || !strings.HasSuffix(a.deletedWith, "::"+n.Name) || !strings.Contains(a.deletedWith, tokInstance) {
				t.Errorf("attachment %s: deleteBeforeReplace %v, deletedWith %q, want true and instance %s", a.name, a.dbr, a.deletedWith, n.Name)
			}
			if v, ok := a.inputs["skipDestroy"]; ok && v.IsBool() && v.BoolValue() {
				t.Errorf("attachment %s: skipDestroy set, but the volume is not kept", a.name)
			}
			for _, opt := range []resource.PropertyKey{"forceDetach", "stopInstanceBeforeDetaching"} {
				if v, ok := a.inputs[opt]; ok && v.IsBool() && v.BoolValue() {
					t.Errorf("attachment %s: %s set", a.name, opt)
				}
			}
			inst := m.named(t, tokInstance, n.Name)
			if !slices.ContainsFunc(inst.deps, func(u string) bool { return strings.HasSuffix(u, "::"+name) }) {
				t.Errorf("instance %s does not depend on its data volume %s: %v", n.Name, name, inst.deps)
			}
		}
	}

	// The only ingress from outside is TCP 22 from the operator's CIDRs; nothing is open to the world.
	checkIngress(t, s, m)

	// Every taggable resource carries the rig's tags.
	want := s.Tags()
	for _, r := range m.resources {
		if untaggable[r.typ] || strings.HasPrefix(r.typ, "pulumi:") {
			continue
		}
		tags, ok := r.inputs["tags"]
		if !ok {
			t.Errorf("%s %s has no tags", r.typ, r.name)
			continue
		}
		for k, v := range want {
			if got := tags.ObjectValue()[resource.PropertyKey(k)]; !got.IsString() || got.StringValue() != v {
				t.Errorf("%s %s: tag %s = %v, want %s", r.typ, r.name, k, got, v)
			}
		}
	}

	// The results bucket: private, encrypted, kept unless told otherwise.
	b := m.one(t, tokBucket)
	if b.retain != s.RetainBucket || b.inputs["forceDestroy"].BoolValue() == s.RetainBucket {
		t.Errorf("bucket retain=%v forceDestroy=%v, spec retainBucket=%v", b.retain, b.inputs["forceDestroy"], s.RetainBucket)
	}
	pab := m.one(t, tokPAB)
	for _, k := range []resource.PropertyKey{"blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"} {
		if !pab.inputs[k].BoolValue() {
			t.Errorf("public access block %s not set", k)
		}
	}
	sse := m.one(t, tokSSE).inputs["rules"].ArrayValue()[0].ObjectValue()["applyServerSideEncryptionByDefault"].ObjectValue()
	if sse["sseAlgorithm"].StringValue() != "AES256" {
		t.Errorf("bucket encryption %v", sse)
	}
	// Results expire after the configured days; 0 keeps them (no rule).
	life := m.byType(tokLife)
	switch {
	case s.ResultsExpireDays == 0 && len(life) != 0:
		t.Errorf("lifecycle rule without resultsExpireDays: %v", life[0].inputs)
	case s.ResultsExpireDays > 0:
		if len(life) != 1 {
			t.Fatalf("want one lifecycle configuration, got %d", len(life))
		}
		rule := life[0].inputs["rules"].ArrayValue()[0].ObjectValue()
		if rule["status"].StringValue() != "Enabled" || int(rule["expiration"].ObjectValue()["days"].NumberValue()) != s.ResultsExpireDays ||
			life[0].inputs["bucket"].StringValue() != b.id || life[0].retain != s.RetainBucket {
			t.Errorf("lifecycle %v (retain %v)", life[0].inputs, life[0].retain)
		}
	}

	// Invokes: the SSM parameter of the family, or the explicit AMI's description.
	wantInvoke := "aws:ssm/getParameter:getParameter"
	if s.AMI != "" {
		wantInvoke = "aws:ec2/getAmi:getAmi"
	}
	if len(m.invokes) != 1 || m.invokes[0] != wantInvoke {
		t.Errorf("invokes %v, want [%s]", m.invokes, wantInvoke)
	}

	// The outputs are the inventory of docs/architecture.md ("Inventory").
	if err := inv.Validate(); err != nil {
		t.Fatal(err)
	}
	wantPlacement := s.Placement
	if wantPlacement == "" {
		wantPlacement = spec.PlacementSingleAZ
	}
	if inv.Target != "aws" || inv.Bucket != b.id || inv.ExpiresAt != "2025-06-01T20:00:00Z" || len(inv.Nodes) != len(nodes) ||
		inv.Placement != wantPlacement {
		t.Fatalf("inventory %+v", inv)
	}
	for i, n := range inv.Nodes {
		key, _ := hostkey.Derive(s.HostKeySeed, s.Stack, nodes[i].Name)
		out := m.named(t, tokInstance, nodes[i].Name).outputs
		if n.Name != nodes[i].Name || n.Role != nodes[i].Role || n.InstanceType != nodes[i].InstanceType || n.AvailabilityZone != nodes[i].Zone ||
			n.Address != out["publicIp"].StringValue() || n.PrivateAddress != out["privateIp"].StringValue() ||
			(nodes[i].DataVolume && (n.DataDevice != "vol-"+volumeName(s, n.Name, specVols[0].Name) || n.DeviceName != spec.DataDeviceName)) ||
			(!nodes[i].DataVolume && (n.DataDevice != "" || n.DeviceName != "" || len(n.Volumes) != 0)) ||
			n.SSH == nil || n.SSH.HostKey != key.Public || n.SSH.Port != 22 || n.SSH.User != s.LoginUser() {
			t.Errorf("inventory node %d: %+v %+v", i, n, n.SSH)
		}
	}
}

// volumeName is the resource name of a node's data volume and of its attachment: NODE-data for
// the one volume of the volume* keys (so an existing stack keeps its volume), NODE-data-NAME for
// each of a dataVolumes list.
func volumeName(s Spec, node, vol string) string {
	if len(s.DataVolumes) == 0 {
		return node + "-data"
	}
	return node + "-data-" + vol
}

// checkInventoryVolumes: the inventory carries each volume of a node with data, in attachment
// order, with its id, device name and what was provisioned, and the agent's device discovery
// finds each by that id in the NVMe serials of a /sys tree laid out as a Nitro instance shows
// the attached volumes.
func checkInventoryVolumes(t *testing.T, s Spec, inv *inventory.Inventory) {
	t.Helper()
	for _, n := range inv.Nodes {
		if n.Role == "client" && !s.ClientDataVolume {
			continue
		}
		if len(n.Volumes) != len(s.Volumes()) {
			t.Fatalf("%s: volumes %+v, want %d", n.Name, n.Volumes, len(s.Volumes()))
		}
		root := t.TempDir()
		for j, sv := range s.Volumes() {
			v := n.Volumes[j]
			thr := sv.Throughput
			if sv.Type != spec.VolumeGP3 {
				thr = 0
			}
			if v.Name != sv.Name || v.VolumeID != "vol-"+volumeName(s, n.Name, sv.Name) || v.DeviceName != sv.Device ||
				v.Type != sv.Type || v.SizeGiB != sv.Size || v.IOPS != sv.IOPS || v.ThroughputMiBps != thr {
				t.Errorf("%s volume %d: %+v, want %+v", n.Name, j, v, sv)
			}
			nitroDevice(t, root, fmt.Sprintf("nvme%dn1", j+1), v.VolumeID, sv.Size)
		}
		for j, v := range n.Volumes {
			dev, size, err := disk.FindVolume(root, v.VolumeID)
			if err != nil || dev != fmt.Sprintf("/dev/nvme%dn1", j+1) || size != uint64(s.Volumes()[j].Size)<<30 {
				t.Errorf("%s: %s found at %s (%d B), %v", n.Name, v.VolumeID, dev, size, err)
			}
		}
	}
}

func checkIngress(t *testing.T, s Spec, m *mocks) {
	t.Helper()
	for _, r := range m.resources {
		if strings.Contains(strings.ToLower(r.typ), "ingress") || strings.HasPrefix(r.typ, "aws:ec2/securityGroupRule") {
			t.Errorf("unexpected stand-alone rule resource %s", r.typ)
		}
	}
	sg := m.one(t, tokSG)
	rules := sg.inputs["ingress"].ArrayValue()
	if len(rules) != 2 {
		t.Fatalf("want 2 ingress rules, got %d: %v", len(rules), rules)
	}
	var v4, v6 []string
	for _, c := range s.OperatorCIDRs {
		if strings.Contains(c, ":") {
			v6 = append(v6, c)
		} else {
			v4 = append(v4, c)
		}
	}
	strs := func(v resource.PropertyValue) []string {
		var out []string
		if v.IsArray() {
			for _, e := range v.ArrayValue() {
				out = append(out, e.StringValue())
			}
		}
		return out
	}
	sawSSH, sawSelf := false, false
	for _, r := range rules {
		o := r.ObjectValue()
		for _, c := range append(strs(o["cidrBlocks"]), strs(o["ipv6CidrBlocks"])...) {
			if c == "0.0.0.0/0" || c == "::/0" {
				t.Errorf("ingress open to the world: %v", o)
			}
		}
		switch {
		case o["self"].IsBool() && o["self"].BoolValue():
			sawSelf = true
			if len(strs(o["cidrBlocks"]))+len(strs(o["ipv6CidrBlocks"])) != 0 {
				t.Errorf("self rule also opens CIDRs: %v", o)
			}
		case o["protocol"].StringValue() == "tcp" && o["fromPort"].NumberValue() == 22 && o["toPort"].NumberValue() == 22:
			sawSSH = true
			if !slices.Equal(strs(o["cidrBlocks"]), v4) || !slices.Equal(strs(o["ipv6CidrBlocks"]), v6) {
				t.Errorf("ssh rule from %v %v, want %v %v", strs(o["cidrBlocks"]), strs(o["ipv6CidrBlocks"]), v4, v6)
			}
		default:
			t.Errorf("unexpected ingress rule %v", o)
		}
	}
	if !sawSSH || !sawSelf {
		t.Errorf("ssh rule %v, self rule %v", sawSSH, sawSelf)
	}
}

// Nothing is registered when the spec is invalid, the seed is missing or the AMI is wrong.
func TestDeployRefusesBeforeAnyResource(t *testing.T) {
	cases := []struct {
		name string
		mut  func(*Spec)
		arch string
		want string
	}{
		{"gp3 above provider cap", func(s *Spec) { s.VolumeThroughput, s.VolumeIOPS = 1500, 8000 }, "", "pulumi-aws v6.83.4"},
		{"no operator cidrs", func(s *Spec) { s.OperatorCIDRs = nil }, "", "operatorCidrs"},
		{"multi-az in a cluster placement group", func(s *Spec) {
			s.Placement, s.AvailabilityZone, s.PlacementStrategy = spec.PlacementMultiAZ, "us-east-1a", spec.StrategyCluster
		}, "", "cannot span availability zones"},
		{"no seed", func(s *Spec) { s.HostKeySeed = "" }, "", "hostKeySeed"},
		{"short seed", func(s *Spec) { s.HostKeySeed = "abcd" }, "", "hostKeySeed"},
		{"arm64 AMI", func(s *Spec) { s.AMI = "ami-0123456789abcdef0" }, "arm64", "x86_64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := baseSpec(t)
			c.mut(&s)
			m, _, err := deploy(t, s, c.arch)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error mentioning %q, got %v", c.want, err)
			}
			for _, r := range m.resources {
				if !strings.HasPrefix(r.typ, "pulumi:") {
					t.Errorf("%s %s registered despite the error", r.typ, r.name)
				}
			}
		})
	}
}

func TestMockFailsOnUnknownInvoke(t *testing.T) {
	m := &mocks{}
	if _, err := m.Call(pulumi.MockCallArgs{Token: "aws:index/getRegion:getRegion"}); err == nil {
		t.Fatal("mock must refuse invokes the program is not expected to make")
	}
}

// A second `pulumi up` must produce the same user data, or every instance would be replaced
// (user data changes replace the instance).
func TestUserDataStableAcrossUpdates(t *testing.T) {
	s := baseSpec(t)
	first, _, err := deploy(t, s, "")
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := deploy(t, s, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Nodes() {
		a := first.named(t, tokInstance, n.Name).inputs["userData"].SecretValue().Element.StringValue()
		b := second.named(t, tokInstance, n.Name).inputs["userData"].SecretValue().Element.StringValue()
		if a != b {
			t.Fatalf("%s: user data differs between two deployments of the same spec", n.Name)
		}
	}
}

// The SSM parameter's value may come back as a secret; the lookup must work either way and the
// image id must not turn the instances' ami into a secret.
func TestAMILookupSecretAndPlain(t *testing.T) {
	for _, secret := range []bool{false, true} {
		s := baseSpec(t)
		m, _, _, err := deployWith(t, s, &mocks{secretSSM: secret})
		if err != nil {
			t.Fatalf("secret=%v: %v", secret, err)
		}
		for _, r := range m.byType(tokInstance) {
			ami := r.inputs["ami"]
			if ami.IsSecret() || !ami.IsString() || ami.StringValue() != ssmAMI {
				t.Errorf("secret=%v: %s ami %v", secret, r.name, ami)
			}
		}
	}
}

// No output holds key material: neither the host key seed, nor any derived private key, nor the
// operator's key beyond its public half.
func TestNoKeyMaterialInOutputs(t *testing.T) {
	s := baseSpec(t)
	_, _, outs, err := deployWith(t, s, &mocks{})
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{s.HostKeySeed, "PRIVATE KEY", "ed25519_private", "BEGIN OPENSSH"}
	for _, n := range s.Nodes() {
		k, _ := hostkey.Derive(s.HostKeySeed, s.Stack, n.Name)
		priv := k.CloudInit() // holds the private key; none of its lines may leak
		for _, line := range strings.Split(priv, "\n") {
			if len(strings.TrimSpace(line)) >= 40 && !strings.Contains(line, k.Public) && !strings.Contains(k.Public, strings.TrimSpace(line)) {
				bad = append(bad, strings.TrimSpace(line))
			}
		}
	}
	for _, b := range bad {
		if strings.Contains(outs, b) {
			t.Errorf("outputs hold key material %.40q", b)
		}
	}
	if !strings.Contains(outs, "ssh-ed25519") {
		t.Fatalf("outputs should hold the public host keys: %.200s", outs)
	}
}

// dataVolumes reads a dataVolumes list as the stack config gives it.
func dataVolumes(t *testing.T, items ...string) []spec.DataVolume {
	t.Helper()
	raw, _ := json.Marshal(items)
	s, ps := spec.FromConfig("t", "us-east-1", map[string]string{"dataVolumes": string(raw)})
	if len(ps) != 0 {
		t.Fatalf("dataVolumes %s: %v", raw, ps)
	}
	return s.DataVolumes
}

// nitroDevice lays out an NVMe EBS device in a /sys tree under root as a Nitro instance shows
// it: the volume id, without its dash, is the controller's serial.
func nitroDevice(t *testing.T, root, name, volumeID string, sizeGiB int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{
		"size":             fmt.Sprintf("%d\n", sizeGiB<<21), // 512-byte sectors
		"queue/rotational": "0\n",
		"device/model":     "Amazon Elastic Block Store              \n",
		"device/serial":    strings.Replace(volumeID, "vol-", "vol", 1) + "\n",
	} {
		p := filepath.Join(root, "sys", "block", name, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Deploy called with the stack config it came from (an inline program of the Automation API
// does this) refuses at the positions `rig validate` prints, and names a key that is not in the
// file as such; without the config the same refusals name the key alone.
func TestDeployRefusalsAreLocated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Pulumi.dev.yaml")
	body := "config:\n  aws:region: us-east-1\n  rig:owner: alice\n  rig:serverInstanceType: c7i.4xlarge\n" +
		"  rig:operatorCidrs: [\"203.0.113.7/32\"]\n  rig:publicKey: " + operatorKey(t) + "\n" +
		"  rig:dataVolumes:\n    - a type=gp3 size=200 iops=4000 throughput=500\n    - b type=gp3 size=200 iops=4000 throughput=1000\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := spec.ReadStackConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	s, want := sc.Spec()
	s.HostKeySeed, s.CreatedAt = testSeed, time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	run := func(s Spec, o Options) error {
		return pulumi.RunErr(func(ctx *pulumi.Context) error {
			_, err := Deploy(ctx, s, o)
			return err
		}, pulumi.WithMocks("rig", s.Stack, &mocks{}))
	}
	err = run(s, Options{Config: sc})
	if len(want.Errors()) == 0 || err == nil {
		t.Fatalf("rig validate: %v; Deploy: %v", want, err)
	}
	for _, p := range want.Errors() {
		if !strings.Contains(err.Error(), p.String()) || !strings.Contains(p.Pos, path+":") {
			t.Errorf("Deploy's refusal lacks rig validate's %q:\n%v", p, err)
		}
	}
	if err := run(s, Options{}); err == nil || strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "rig:dataVolumes = ") {
		t.Errorf("without the config: %v", err)
	}

	s.DataVolumes, s.HostKeySeed = nil, ""
	err = run(s, Options{Config: sc})
	if !errors.Is(err, ErrNoHostKeySeed) || !strings.Contains(err.Error(), path+" (not set; default or generated): rig:hostKeySeed is not set") {
		t.Errorf("no seed: %v", err)
	}
}
