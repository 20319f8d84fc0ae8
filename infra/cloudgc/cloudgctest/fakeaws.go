// Package cloudgctest is a fake AWS for tests of the rig's cloud-side gc: the EC2 Query API (the
// calls gc makes, refusing them in the wrong order as AWS does), the Resource Groups Tagging API
// (RPC v2 CBOR, as the SDK speaks it) and S3 (gofakes3), each on an httptest endpoint that the
// SDK's own clients reach through BaseEndpoint or AWS_ENDPOINT_URL_<SERVICE>.
package cloudgctest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/encoding/cbor"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/rig-dev/rig/infra/cloudgc"
)

// AWS serves, on httptest endpoints that the real SDK clients reach through BaseEndpoint,
// the EC2 Query API (the calls gc makes, with AWS's dependency errors: a volume in use, a
// subnet or VPC with dependents), the Resource Groups Tagging API (JSON) and S3 (gofakes3).
type AWS struct {
	mu        sync.Mutex
	Region    string
	tagged    []tagged // what GetResources returns
	instances map[string]*instance
	volumes   map[string]string // id -> instance it is attached to ("" when available)
	exists    map[string]bool   // every other resource by id
	assoc     map[string]string // route table -> association id
	igwVPC    map[string]string // internet gateway -> attached VPC
	vpcOf     map[string]string // subnet, security group, route table, gateway -> VPC
	calls     []string          // mutating calls in order
	s3        *s3mem.Backend
	EC2URL    string
	TagURL    string
	S3URL     string
}

type tagged struct {
	arn  string
	tags map[string]string
}

type instance struct {
	typ, state, ip string
}

// New starts the fake endpoints of one region; they close when the test ends.
func New(t testing.TB, region string) *AWS {
	f := &AWS{Region: region, instances: map[string]*instance{}, volumes: map[string]string{},
		exists: map[string]bool{}, assoc: map[string]string{}, igwVPC: map[string]string{}, vpcOf: map[string]string{},
		s3: s3mem.New()}
	ec2Srv := httptest.NewServer(http.HandlerFunc(f.serveEC2))
	tagSrv := httptest.NewServer(http.HandlerFunc(f.serveTagging))
	s3Srv := httptest.NewServer(gofakes3.New(f.s3).Server())
	t.Cleanup(func() { ec2Srv.Close(); tagSrv.Close(); s3Srv.Close() })
	f.EC2URL, f.TagURL, f.S3URL = ec2Srv.URL, tagSrv.URL, s3Srv.URL
	return f
}

// Clients are the SDK's own clients, pointed at the fake endpoints.
func (f *AWS) Clients() cloudgc.Clients {
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	return cloudgc.Clients{
		EC2: ec2.New(ec2.Options{Region: f.Region, BaseEndpoint: aws.String(f.EC2URL), Credentials: creds,
			Retryer: aws.NopRetryer{}}),
		Tagging: resourcegroupstaggingapi.New(resourcegroupstaggingapi.Options{Region: f.Region,
			BaseEndpoint: aws.String(f.TagURL), Credentials: creds, Retryer: aws.NopRetryer{}}),
		S3: s3.New(s3.Options{Region: f.Region, BaseEndpoint: aws.String(f.S3URL), UsePathStyle: true, Credentials: creds}),
	}
}

// Cluster adds one rig cluster as rig up builds it: a VPC with subnet, route table, gateway and
// security group, a placement group, a key pair, one instance per entry of types with a data
// volume attached, and a retained bucket holding objects.
func (f *AWS) Cluster(stack, expires string, types []string, bucketObjects int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tags := map[string]string{"rig-stack": stack, "expires-at": expires, "owner": "alice", "Name": "rig-" + stack}
	add := func(kind, id string) {
		arn := fmt.Sprintf("arn:aws:ec2:%s:123456789012:%s/%s", f.Region, kind, id)
		f.tagged = append(f.tagged, tagged{arn: arn, tags: tags})
		f.exists[id] = true
	}
	vpc := "vpc-" + stack
	add("vpc", vpc)
	for kind, id := range map[string]string{cloudgc.KindSubnet: "subnet-" + stack, cloudgc.KindSecurityGroup: "sg-" + stack,
		cloudgc.KindRouteTable: "rtb-" + stack, cloudgc.KindInternetGateway: "igw-" + stack} {
		add(kind, id)
		f.vpcOf[id] = vpc
	}
	f.assoc["rtb-"+stack] = "rtbassoc-" + stack
	f.igwVPC["igw-"+stack] = vpc
	add("placement-group", "rig-pg-"+stack)
	f.vpcOf["rig-pg-"+stack] = vpc
	add("key-pair", "key-"+stack)
	for i, typ := range types {
		inst, vol := fmt.Sprintf("i-%s%d", stack, i), fmt.Sprintf("vol-%s%d", stack, i)
		add("instance", inst)
		add("volume", vol)
		f.instances[inst] = &instance{typ: typ, state: "running", ip: fmt.Sprintf("198.51.100.%d", 10+i)}
		f.volumes[vol] = inst
		f.vpcOf[inst] = vpc
	}
	bucket := "rig-" + stack + "-results"
	f.tagged = append(f.tagged, tagged{arn: "arn:aws:s3:::" + bucket, tags: tags})
	_ = f.s3.CreateBucket(bucket)
	for i := 0; i < bucketObjects; i++ {
		body := strings.Repeat("x", 1000)
		_, _ = f.s3.PutObject(bucket, fmt.Sprintf("%s/run-%d.tar.zst", stack, i), nil, strings.NewReader(body), int64(len(body)), nil)
	}
}

// serveTagging answers GetResources in the protocol the SDK's client speaks (RPC v2 CBOR).
func (f *AWS) serveTagging(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/service/ResourceGroupsTaggingAPI_20170126/operation/GetResources") ||
		r.Header.Get("Smithy-Protocol") != "rpc-v2-cbor" {
		http.Error(w, "unsupported "+r.URL.Path, http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(r.Body)
	in, err := cbor.Decode(body)
	filters, _ := in.(cbor.Map)["TagFilters"].(cbor.List)
	if err != nil || len(filters) != 1 || filters[0].(cbor.Map)["Key"] != cbor.String("rig-stack") {
		http.Error(w, fmt.Sprintf("want one rig-stack tag filter, got %v %v", in, err), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var list cbor.List
	for _, t := range f.tagged {
		var tags cbor.List
		for k, v := range t.tags {
			tags = append(tags, cbor.Map{"Key": cbor.String(k), "Value": cbor.String(v)})
		}
		list = append(list, cbor.Map{"ResourceARN": cbor.String(t.arn), "Tags": tags})
	}
	w.Header().Set("Content-Type", "application/cbor")
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	_, _ = w.Write(cbor.Encode(cbor.Map{"ResourceTagMappingList": list}))
}

func (f *AWS) serveEC2(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	action := r.Form.Get("Action")
	list := func(prefix string) []string {
		var out []string
		for i := 1; r.Form.Get(fmt.Sprintf("%s.%d", prefix, i)) != ""; i++ {
			out = append(out, r.Form.Get(fmt.Sprintf("%s.%d", prefix, i)))
		}
		return out
	}
	fail := func(code, msg string) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>r</RequestID></Response>", code, msg)
	}
	ok := func(body string) {
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, "<%sResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId>%s</%sResponse>", action, body, action)
	}
	running := func(vpc string) int {
		n := 0
		for id, in := range f.instances {
			if in.state != "terminated" && f.vpcOf[id] == vpc {
				n++
			}
		}
		return n
	}
	gone := func(id string) bool {
		if !f.exists[id] {
			fail("InvalidID.NotFound", id+" does not exist")
			return false
		}
		delete(f.exists, id)
		f.calls = append(f.calls, action+" "+id)
		ok("<return>true</return>")
		return true
	}
	switch action {
	case "DescribeInstances":
		var b strings.Builder
		b.WriteString("<reservationSet><item><instancesSet>")
		for _, id := range list("InstanceId") {
			in := f.instances[id]
			if in == nil {
				continue
			}
			if in.state == "shutting-down" { // one look later it is gone
				defer func() { in.state = "terminated" }()
			}
			fmt.Fprintf(&b, "<item><instanceId>%s</instanceId><instanceType>%s</instanceType><instanceState><name>%s</name></instanceState><ipAddress>%s</ipAddress></item>",
				id, in.typ, in.state, in.ip)
		}
		b.WriteString("</instancesSet></item></reservationSet>")
		ok(b.String())
	case "DescribeVolumes":
		var b strings.Builder
		b.WriteString("<volumeSet>")
		for _, id := range list("VolumeId") {
			status := "available"
			if in := f.instances[f.volumes[id]]; in != nil && in.state != "terminated" {
				status = "in-use"
			}
			fmt.Fprintf(&b, "<item><volumeId>%s</volumeId><size>200</size><volumeType>gp3</volumeType><iops>4000</iops><throughput>1000</throughput><status>%s</status></item>", id, status)
		}
		b.WriteString("</volumeSet>")
		ok(b.String())
	case "TerminateInstances":
		for _, id := range list("InstanceId") {
			f.instances[id].state = "shutting-down"
			f.calls = append(f.calls, action+" "+id)
			delete(f.exists, id)
		}
		ok("<instancesSet/>")
	case "DeleteVolume":
		id := r.Form.Get("VolumeId")
		if in := f.instances[f.volumes[id]]; in != nil && in.state != "terminated" {
			fail("VolumeInUse", id+" is attached to "+f.volumes[id])
			return
		}
		gone(id)
	case "DeleteKeyPair":
		gone(r.Form.Get("KeyPairId"))
	case "DeletePlacementGroup", "DeleteSecurityGroup", "DeleteSubnet":
		id := r.Form.Get("GroupName") + r.Form.Get("GroupId") + r.Form.Get("SubnetId")
		if running(f.vpcOf[id]) > 0 {
			fail("DependencyViolation", "instances still use "+id)
			return
		}
		gone(id)
	case "DescribeRouteTables":
		id := list("RouteTableId")[0]
		assoc := ""
		if a := f.assoc[id]; a != "" {
			assoc = "<item><routeTableAssociationId>" + a + "</routeTableAssociationId><main>false</main></item>"
		}
		ok("<routeTableSet><item><routeTableId>" + id + "</routeTableId><associationSet>" + assoc + "</associationSet></item></routeTableSet>")
	case "DisassociateRouteTable":
		for rt, a := range f.assoc {
			if a == r.Form.Get("AssociationId") {
				delete(f.assoc, rt)
				f.calls = append(f.calls, action+" "+a)
			}
		}
		ok("<return>true</return>")
	case "DeleteRouteTable":
		id := r.Form.Get("RouteTableId")
		if f.assoc[id] != "" {
			fail("DependencyViolation", id+" has associations")
			return
		}
		gone(id)
	case "DescribeInternetGateways":
		id := list("InternetGatewayId")[0]
		att := ""
		if v := f.igwVPC[id]; v != "" {
			att = "<item><vpcId>" + v + "</vpcId><state>available</state></item>"
		}
		ok("<internetGatewaySet><item><internetGatewayId>" + id + "</internetGatewayId><attachmentSet>" + att + "</attachmentSet></item></internetGatewaySet>")
	case "DetachInternetGateway":
		delete(f.igwVPC, r.Form.Get("InternetGatewayId"))
		f.calls = append(f.calls, action+" "+r.Form.Get("InternetGatewayId"))
		ok("<return>true</return>")
	case "DeleteInternetGateway":
		id := r.Form.Get("InternetGatewayId")
		if f.igwVPC[id] != "" {
			fail("DependencyViolation", id+" is attached")
			return
		}
		gone(id)
	case "DeleteVpc":
		id := r.Form.Get("VpcId")
		for dep, v := range f.vpcOf {
			if in := f.instances[dep]; v == id && (f.exists[dep] || (in != nil && in.state != "terminated")) {
				fail("DependencyViolation", id+" still has "+dep)
				return
			}
		}
		gone(id)
	default:
		fail("InvalidAction", "fake EC2 does not do "+action)
	}
}

// Mutations are the changing calls made, in order ("DeleteVpc vpc-x").
func (f *AWS) Mutations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Remaining lists the ids of resources that still exist.
func (f *AWS) Remaining() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.exists {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
