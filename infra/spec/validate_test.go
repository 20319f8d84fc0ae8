package spec

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/rig-dev/rig/internal/units"
)

var testPublicKey = func() string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " operator@example"
}()

func validSpec() Spec {
	return Spec{
		Stack: "t", Region: "us-east-1", AvailabilityZone: "us-east-1a",
		ServerInstanceType: "c6in.16xlarge", ClientInstanceType: "c6in.16xlarge", Servers: 3, Clients: 1,
		AMIFamily: FamilyAL2023, VolumeType: VolumeGP3, VolumeSize: 200, VolumeIOPS: 4000, VolumeThroughput: 1000,
		RootVolumeSize: 30, OperatorCIDRs: []string{"203.0.113.7/32"}, PublicKey: testPublicKey, Owner: "alice",
		ExpiresInHours: 8, RetainBucket: true,
	}
}

func TestValidSpecHasNoProblems(t *testing.T) {
	if ps := Validate(validSpec()); len(ps) != 0 {
		t.Fatalf("valid spec: %v", ps)
	}
}

// Every limit at and just past its boundary. want is the severity expected for field, or -1 for
// "no problem of any severity on this field".
func TestValidateBoundaries(t *testing.T) {
	none := Severity(-1)
	cases := []struct {
		name  string
		mut   func(*Spec)
		field string
		want  Severity
	}{
		{"servers 1", func(s *Spec) { s.Servers = 1 }, "servers", none},
		{"servers 0", func(s *Spec) { s.Servers = 0 }, "servers", SeverityError},
		{"clients 1", func(s *Spec) { s.Clients = 1 }, "clients", none},
		{"clients 0", func(s *Spec) { s.Clients = 0 }, "clients", SeverityError},

		{"gp3 iops 3000", func(s *Spec) { s.VolumeIOPS, s.VolumeThroughput = 3000, 750 }, "volumeIops", none},
		{"gp3 iops 2999", func(s *Spec) { s.VolumeIOPS, s.VolumeThroughput = 2999, 125 }, "volumeIops", SeverityError},
		{"gp3 iops 80000", func(s *Spec) { s.VolumeIOPS, s.VolumeSize = 80000, 160 }, "volumeIops", none},
		{"gp3 iops 80001", func(s *Spec) { s.VolumeIOPS, s.VolumeSize = 80001, 200 }, "volumeIops", SeverityError},
		{"gp3 throughput 125", func(s *Spec) { s.VolumeThroughput = 125 }, "volumeThroughput", none},
		{"gp3 throughput 124", func(s *Spec) { s.VolumeThroughput = 124 }, "volumeThroughput", SeverityError},
		{"gp3 throughput 1000", func(s *Spec) { s.VolumeThroughput = 1000 }, "volumeThroughput", none},
		{"gp3 throughput 1001", func(s *Spec) { s.VolumeThroughput, s.VolumeIOPS = 1001, 8000 }, "volumeThroughput", SeverityError},
		{"gp3 throughput 2000 (AWS max)", func(s *Spec) { s.VolumeThroughput, s.VolumeIOPS = 2000, 8000 }, "volumeThroughput", SeverityError},
		{"gp3 0.25 MiB/s per IOPS at", func(s *Spec) { s.VolumeIOPS, s.VolumeThroughput = 3200, 800 }, "volumeThroughput", none},
		{"gp3 0.25 MiB/s per IOPS past", func(s *Spec) { s.VolumeIOPS, s.VolumeThroughput = 3199, 800 }, "volumeThroughput", SeverityError},
		{"gp3 500 IOPS/GiB at", func(s *Spec) { s.VolumeSize, s.VolumeIOPS, s.VolumeThroughput = 10, 5000, 125 }, "volumeIops", none},
		{"gp3 500 IOPS/GiB past", func(s *Spec) { s.VolumeSize, s.VolumeIOPS, s.VolumeThroughput = 10, 5001, 125 }, "volumeIops", SeverityError},
		{"gp3 baseline IOPS on 1 GiB", func(s *Spec) { s.VolumeSize, s.VolumeIOPS, s.VolumeThroughput = 1, 3000, 125 }, "volumeIops", none},
		{"gp3 size 1", func(s *Spec) { s.VolumeSize, s.VolumeIOPS, s.VolumeThroughput = 1, 3000, 125 }, "volumeSize", none},
		{"gp3 size 0", func(s *Spec) { s.VolumeSize, s.VolumeIOPS, s.VolumeThroughput = 0, 3000, 125 }, "volumeSize", SeverityError},
		{"gp3 size 65536", func(s *Spec) { s.VolumeSize = 65536 }, "volumeSize", none},
		{"gp3 size 65537", func(s *Spec) { s.VolumeSize = 65537 }, "volumeSize", SeverityError},

		{"io2 iops 100", func(s *Spec) { s.VolumeType, s.VolumeIOPS = VolumeIO2, 100 }, "volumeIops", none},
		{"io2 iops 99", func(s *Spec) { s.VolumeType, s.VolumeIOPS = VolumeIO2, 99 }, "volumeIops", SeverityError},
		{"io2 iops 256000", func(s *Spec) {
			s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 256000, 256
			s.ServerInstanceType, s.ClientInstanceType = "c6in.32xlarge", "c6in.32xlarge"
		}, "volumeIops", none},
		{"io2 iops 256001", func(s *Spec) {
			s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 256001, 300
			s.ServerInstanceType, s.ClientInstanceType = "c6in.32xlarge", "c6in.32xlarge"
		}, "volumeIops", SeverityError},
		{"io2 1000 IOPS/GiB at", func(s *Spec) { s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 50000, 50 }, "volumeIops", none},
		{"io2 1000 IOPS/GiB past", func(s *Spec) { s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 50001, 50 }, "volumeIops", SeverityError},
		{"io2 70000 on 50 GiB", func(s *Spec) { s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 70000, 50 }, "volumeIops", SeverityError},
		{"io2 size 4", func(s *Spec) { s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 100, 4 }, "volumeSize", none},
		{"io2 size 3", func(s *Spec) { s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 100, 3 }, "volumeSize", SeverityError},
		{"io2 size 65536", func(s *Spec) { s.VolumeType, s.VolumeSize = VolumeIO2, 65536 }, "volumeSize", none},
		{"io2 size 65537", func(s *Spec) { s.VolumeType, s.VolumeSize = VolumeIO2, 65537 }, "volumeSize", SeverityError},
		{"io2 ignores throughput", func(s *Spec) { s.VolumeType, s.VolumeThroughput = VolumeIO2, 5000 }, "volumeThroughput", none},
		{"volume type st1", func(s *Spec) { s.VolumeType = "st1" }, "volumeType", SeverityError},

		// c7i.4xlarge: 625 MB/s baseline, 1,250 MB/s maximum; 20,000 / 40,000 IOPS.
		{"c7i.4xlarge 596 MiB/s (625.0 MB/s)", func(s *Spec) { c7i4(s); s.VolumeThroughput = 596 }, "volumeThroughput", none},
		{"c7i.4xlarge 597 MiB/s (626.0 MB/s)", func(s *Spec) { c7i4(s); s.VolumeThroughput = 597 }, "volumeThroughput", SeverityWarning},
		{"c7i.4xlarge 1000 MiB/s", func(s *Spec) { c7i4(s); s.VolumeThroughput = 1000 }, "volumeThroughput", SeverityWarning},
		{"c7i.4xlarge 20000 IOPS", func(s *Spec) { c7i4(s); s.VolumeIOPS = 20000 }, "volumeIops", none},
		{"c7i.4xlarge 20001 IOPS", func(s *Spec) { c7i4(s); s.VolumeIOPS = 20001 }, "volumeIops", SeverityWarning},
		{"c7i.4xlarge 40000 IOPS", func(s *Spec) { c7i4(s); s.VolumeIOPS = 40000 }, "volumeIops", SeverityWarning},
		{"c7i.4xlarge 40001 IOPS", func(s *Spec) { c7i4(s); s.VolumeIOPS = 40001 }, "volumeIops", SeverityError},
		// c6in.16xlarge: 6,250 MB/s and 200,000 IOPS, no burst.
		{"c6in.16xlarge io2 200000", func(s *Spec) { s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 200000, 200 }, "volumeIops", none},
		{"c6in.16xlarge io2 200001", func(s *Spec) { s.VolumeType, s.VolumeIOPS, s.VolumeSize = VolumeIO2, 200001, 201 }, "volumeIops", SeverityError},
		// A client type smaller than the server type is checked too.
		{"client c7i.large 1000 MiB/s, client volume", func(s *Spec) { s.ClientInstanceType, s.ClientDataVolume = "c7i.large", true }, "volumeThroughput", SeverityWarning},
		{"client c7i.large 40001 IOPS, client volume", func(s *Spec) { s.ClientInstanceType, s.VolumeIOPS, s.ClientDataVolume = "c7i.large", 40001, true }, "volumeIops", SeverityError},
		// Without a data volume the client's EBS bandwidth is not the volume's concern.
		{"client c7i.large 1000 MiB/s, root only", func(s *Spec) { s.ClientInstanceType = "c7i.large" }, "volumeThroughput", none},
		{"client c7i.large 40001 IOPS, root only", func(s *Spec) { s.ClientInstanceType, s.VolumeIOPS = "c7i.large", 40001 }, "volumeIops", none},

		{"burstable t3", func(s *Spec) { s.ServerInstanceType = "t3.large" }, "serverInstanceType", SeverityError},
		{"flex", func(s *Spec) { s.ClientInstanceType = "c7i-flex.large" }, "clientInstanceType", SeverityError},
		{"not in table", func(s *Spec) { s.ServerInstanceType = "m5.large" }, "serverInstanceType", SeverityError},
		{"typo", func(s *Spec) { s.ServerInstanceType = "c7i.4xlarg" }, "serverInstanceType", SeverityError},

		{"region empty", func(s *Spec) { s.Region = "" }, "aws:region", SeverityError},
		{"az of other region", func(s *Spec) { s.AvailabilityZone = "us-west-2a" }, "availabilityZone", SeverityError},
		{"az without letter", func(s *Spec) { s.AvailabilityZone = "us-east-1" }, "availabilityZone", SeverityError},
		{"ami ok", func(s *Spec) { s.AMI = "ami-0123456789abcdef0" }, "ami", none},
		{"ami bad", func(s *Spec) { s.AMI = "ubuntu" }, "ami", SeverityError},
		{"ami family", func(s *Spec) { s.AMIFamily = "debian" }, "amiFamily", SeverityError},
		{"ssh user", func(s *Spec) { s.SSHUser = "Root User" }, "sshUser", SeverityError},

		{"root 8", func(s *Spec) { s.RootVolumeSize = 8 }, "rootVolumeSize", none},
		{"root 7", func(s *Spec) { s.RootVolumeSize = 7 }, "rootVolumeSize", SeverityError},
		{"expires 1", func(s *Spec) { s.ExpiresInHours = 1 }, "expiresInHours", none},
		{"expires 0", func(s *Spec) { s.ExpiresInHours = 0 }, "expiresInHours", SeverityError},
		{"expires 720", func(s *Spec) { s.ExpiresInHours = 720 }, "expiresInHours", none},
		{"expires 721", func(s *Spec) { s.ExpiresInHours = 721 }, "expiresInHours", SeverityError},

		{"cidrs none", func(s *Spec) { s.OperatorCIDRs = nil }, "operatorCidrs", SeverityError},
		{"cidr whole v4 internet", func(s *Spec) { s.OperatorCIDRs = []string{"0.0.0.0/0"} }, "operatorCidrs", SeverityError},
		{"cidr whole v6 internet", func(s *Spec) { s.OperatorCIDRs = []string{"::/0"} }, "operatorCidrs", SeverityError},
		{"cidr host bits", func(s *Spec) { s.OperatorCIDRs = []string{"10.0.0.5/24"} }, "operatorCidrs", SeverityError},
		{"cidr garbage", func(s *Spec) { s.OperatorCIDRs = []string{"my laptop"} }, "operatorCidrs", SeverityError},
		{"cidr v6 /64 next to v4", func(s *Spec) { s.OperatorCIDRs = []string{"2001:db8::/64", "198.51.100.0/24"} }, "operatorCidrs", SeverityWarning},
		{"cidr v6 only", func(s *Spec) { s.OperatorCIDRs = []string{"2001:db8::/64"} }, "operatorCidrs", SeverityError},
		{"results expire 0", func(s *Spec) { s.ResultsExpireDays = 0 }, "resultsExpireDays", none},
		{"results expire 3650", func(s *Spec) { s.ResultsExpireDays = 3650 }, "resultsExpireDays", none},
		{"results expire 3651", func(s *Spec) { s.ResultsExpireDays = 3651 }, "resultsExpireDays", SeverityError},
		{"results expire -1", func(s *Spec) { s.ResultsExpireDays = -1 }, "resultsExpireDays", SeverityError},
		{"capacity reservation", func(s *Spec) { s.ServerCapacityReservationID = "cr-0123456789abcdef0" }, "serverCapacityReservationId", none},
		{"capacity reservation bad", func(s *Spec) { s.ServerCapacityReservationID = "cr-xyz" }, "serverCapacityReservationId", SeverityError},
		{"client capacity reservation bad", func(s *Spec) { s.ClientCapacityReservationID = "cr-xyz" }, "clientCapacityReservationId", SeverityError},
		{"public key bad", func(s *Spec) { s.PublicKey = "ssh-ed25519 nope" }, "publicKey", SeverityError},
		{"public key empty", func(s *Spec) { s.PublicKey = "" }, "publicKey", SeverityError},
		{"owner empty", func(s *Spec) { s.Owner = "" }, "owner", SeverityError},
		{"owner email", func(s *Spec) { s.Owner = "alice@example.com" }, "owner", none},

		{"vpc without subnet", func(s *Spec) { s.VPCID = "vpc-0123456789abcdef0" }, "subnetId", SeverityError},
		{"subnet without vpc", func(s *Spec) { s.SubnetID = "subnet-0123456789abcdef0" }, "vpcId", SeverityError},
		{"reuse ok", func(s *Spec) { s.VPCID, s.SubnetID = "vpc-0123456789abcdef0", "subnet-0123456789abcdef0" }, "vpcId", none},
		{"reuse bad subnet", func(s *Spec) { s.VPCID, s.SubnetID = "vpc-0123456789abcdef0", "sn-1" }, "subnetId", SeverityError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validSpec()
			c.mut(&s)
			got := Validate(s).Field(c.field)
			if c.want == none {
				if len(got) != 0 {
					t.Fatalf("%s: want no problem, got %v", c.field, got)
				}
				return
			}
			if len(got) == 0 {
				t.Fatalf("%s: want a %s, got none (all: %v)", c.field, c.want, Validate(s))
			}
			for _, p := range got {
				if p.Severity != c.want {
					t.Fatalf("%s: want %s, got %v", c.field, c.want, got)
				}
				if p.Value == "" || p.Allowed == "" {
					t.Fatalf("problem must name value and allowed range: %+v", p)
				}
			}
		})
	}
}

func c7i4(s *Spec) { s.ServerInstanceType, s.ClientInstanceType = "c7i.4xlarge", "c7i.4xlarge" }

func TestThroughputCapSaysWhy(t *testing.T) {
	s := validSpec()
	s.VolumeThroughput, s.VolumeIOPS = 1500, 8000
	ps := Validate(s).Field("volumeThroughput")
	if len(ps) != 1 {
		t.Fatalf("want one problem, got %v", ps)
	}
	msg := ps[0].String()
	for _, want := range []string{"rig:volumeThroughput = 1,500 MiB/s", "125-1,000 MiB/s", "pulumi-aws v6.83.4", "2,000"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}

// An instance whose EBS maximum is below the volume's throughput is an error, even when the volume
// is itself out of range: every problem shows at once.
func TestEveryProblemAtOnce(t *testing.T) {
	s := validSpec()
	c7i4(&s)
	s.VolumeThroughput, s.VolumeIOPS = 1500, 8000
	s.Servers = 0
	s.OperatorCIDRs = []string{"0.0.0.0/0"}
	ps := Validate(s)
	for _, f := range []string{"servers", "operatorCidrs"} {
		if len(ps.Field(f).Errors()) != 1 {
			t.Errorf("%s: want one error, got %v", f, ps.Field(f))
		}
	}
	thr := ps.Field("volumeThroughput").Errors()
	if len(thr) != 2 { // above the provider cap, and above c7i.4xlarge's 1,250 MB/s maximum
		t.Fatalf("volumeThroughput: want 2 errors, got %v", thr)
	}
	if !strings.Contains(thr[1].String(), "1,250 MB/s") || !strings.Contains(thr[1].String(), "c7i.4xlarge") {
		t.Errorf("instance problem should name the type and its maximum: %s", thr[1])
	}
	err := ps.Err()
	if err == nil || !strings.Contains(err.Error(), "4 problem(s)") {
		t.Fatalf("Err: %v", err)
	}
}

func TestWarningMentionsBaselineAndBurst(t *testing.T) {
	s := validSpec()
	c7i4(&s)
	ps := Validate(s)
	if err := ps.Err(); err != nil {
		t.Fatalf("warnings must not be errors: %v", err)
	}
	w := ps.Warnings().Field("volumeThroughput")
	if len(w) != 1 {
		t.Fatalf("want one warning (server and client share the type), got %v", ps)
	}
	for _, want := range []string{"1,000 MiB/s (1,049 MB/s)", "625 MB/s", "1,250 MB/s", "30 minutes"} {
		if !strings.Contains(w[0].String(), want) {
			t.Errorf("%q lacks %q", w[0].String(), want)
		}
	}
}

func TestInstanceTableMatchesIssueFigures(t *testing.T) {
	for _, c := range []struct {
		name       string
		base, max_ float64
	}{{"c7i.4xlarge", 625, 1250}, {"c6in.16xlarge", 6250, 6250}, {"c6in.4xlarge", 1562.5, 3125}} {
		it, ok := LookupInstance(c.name)
		if !ok || it.EBSBaselineMBps != c.base || it.EBSMaxMBps != c.max_ {
			t.Errorf("%s: got %+v, want %v/%v MB/s", c.name, it, c.base, c.max_)
		}
	}
	for _, fam := range []string{"c6in", "c7i"} {
		n := 0
		for _, name := range InstanceNames() {
			if strings.HasPrefix(name, fam+".") {
				n++
			}
		}
		if want := map[string]int{"c6in": 10, "c7i": 11}[fam]; n != want {
			t.Errorf("%s: %d sizes in the table, want %d", fam, n, want)
		}
	}
}

func TestFromConfig(t *testing.T) {
	s, ps := FromConfig("dev", "eu-west-1", map[string]string{
		"servers": "5", "operatorCidrs": `["203.0.113.0/24"]`, "retainBucket": "false", "createdAt": "2025-06-01T10:00:00Z",
	})
	if len(ps) != 0 {
		t.Fatal(ps)
	}
	if s.Servers != 5 || s.Clients != 1 || s.AvailabilityZone != "eu-west-1a" || s.RetainBucket || s.OperatorCIDRs[0] != "203.0.113.0/24" {
		t.Fatalf("%+v", s)
	}
	if s.VolumeThroughput != 1000 || s.VolumeType != VolumeGP3 || s.ServerInstanceType != "c6in.16xlarge" {
		t.Fatalf("defaults not applied: %+v", s)
	}
	if got := s.ExpiresAt().Format("15:04"); got != "18:00" {
		t.Fatalf("expires %s", got)
	}
	if s.Tags()["expires-at"] != "2025-06-01T18:00:00Z" || s.Tags()["rig-stack"] != "dev" {
		t.Fatalf("tags %v", s.Tags())
	}

	_, ps = FromConfig("dev", "us-east-1", map[string]string{"servers": "three", "retainBucket": "maybe", "operatorCidrs": "1.2.3.4/32", "createdAt": "yesterday"})
	for _, f := range []string{"servers", "retainBucket", "operatorCidrs", "createdAt"} {
		if len(ps.Field(f)) != 1 {
			t.Errorf("%s: want a parse problem, got %v", f, ps)
		}
	}
}

func TestNodesAndLoginUser(t *testing.T) {
	s := validSpec()
	s.Servers, s.Clients = 2, 2
	var names []string
	for _, n := range s.Nodes() {
		names = append(names, n.Name+"/"+n.Role)
	}
	if got := strings.Join(names, " "); got != "node-0/server node-1/server client-0/client client-1/client" {
		t.Fatal(got)
	}
	for _, c := range []struct{ ami, fam, user, want string }{
		{"", FamilyAL2023, "", "ec2-user"}, {"", FamilyUbuntu, "", "ubuntu"},
		{"ami-0123456789abcdef0", FamilyUbuntu, "", "ec2-user"}, {"", FamilyUbuntu, "admin", "admin"},
	} {
		s.AMI, s.AMIFamily, s.SSHUser = c.ami, c.fam, c.user
		if got := s.LoginUser(); got != c.want {
			t.Errorf("%+v: %s", c, got)
		}
	}
}

func TestGroup(t *testing.T) {
	for in, want := range map[string]string{"1": "1", "999": "999", "1000": "1,000", "256000": "256,000", "1562.50": "1,562.50", "-1000": "-1,000"} {
		if got := units.Group(in); got != want {
			t.Errorf("units.Group(%s) = %s", in, got)
		}
	}
}
