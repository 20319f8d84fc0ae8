// Command standin is a stand-in for the aws resource plugin (pulumi-resource-aws), for running
// the rig's program through the real Pulumi engine with no AWS and no network (infra/realpulumi).
// It is a real provider process speaking the engine's gRPC protocol (pulumirpc.ResourceProvider):
// Check returns the inputs, Create and Update echo them as outputs with the few computed outputs
// the program reads (ids, addresses, generated names), Diff names every changed input and asks
// for a replacement when the change is to a property that the provider replaces (a short table
// of pulumi-aws v6's ForceNew properties, for the inputs the program sets), and Invoke answers
// the two lookups the program makes. It validates nothing AWS-side. Every Create, Update and
// Delete is appended to $RIG_STANDIN_LOG, one line "OP TYPE NAME", so a check can tell a delete
// the engine skipped (DeletedWith) from one it asked for.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Version is the pulumi-aws version the program's SDK asks for (go.mod: pulumi-aws/sdk/v6).
const Version = "6.83.4"

// forceNew lists, per resource type, the inputs whose change replaces the resource.
var forceNew = map[string][]string{
	"aws:ec2/volumeAttachment:VolumeAttachment": {"deviceName", "instanceId", "volumeId"},
	"aws:ec2/instance:Instance": {"ami", "availabilityZone", "subnetId", "placementGroup", "keyName",
		"associatePublicIpAddress", "userData"}, // userData: with userDataReplaceOnChange, as the program sets it
	"aws:ebs/volume:Volume":                                  {"availabilityZone", "encrypted", "snapshotId"},
	"aws:ec2/subnet:Subnet":                                  {"vpcId", "cidrBlock", "availabilityZone"},
	"aws:ec2/vpc:Vpc":                                        {"cidrBlock"},
	"aws:ec2/route:Route":                                    {"routeTableId", "destinationCidrBlock"},
	"aws:ec2/routeTable:RouteTable":                          {"vpcId"},
	"aws:ec2/routeTableAssociation:RouteTableAssociation":    {"subnetId"},
	"aws:ec2/placementGroup:PlacementGroup":                  {"strategy", "spreadLevel", "partitionCount"},
	"aws:ec2/keyPair:KeyPair":                                {"publicKey"},
	"aws:ec2/securityGroup:SecurityGroup":                    {"vpcId", "description"},
	"aws:s3/bucketV2:BucketV2":                               {"bucketPrefix"},
	"aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": {"bucket"},
}

var opts = plugin.MarshalOptions{KeepUnknowns: true, KeepSecrets: true, KeepResources: true}

type server struct {
	pulumirpc.UnimplementedResourceProviderServer
	mu sync.Mutex
}

// main serves the provider as the engine starts a plugin: it listens on a loopback port and
// writes the port on stdout; the engine's address and flags in the arguments are not needed.
func main() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := grpc.NewServer()
	pulumirpc.RegisterResourceProviderServer(srv, &server{})
	fmt.Printf("%d\n", lis.Addr().(*net.TCPAddr).Port)
	if err := srv.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func (s *server) record(op string, urn string) {
	path := os.Getenv("RIG_STANDIN_LOG")
	if path == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := resource.URN(urn)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s\n", op, u.Type(), u.Name())
}

func (s *server) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: Version}, nil
}

func (s *server) CheckConfig(_ context.Context, r *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	return &pulumirpc.CheckResponse{Inputs: r.GetNews()}, nil
}

func (s *server) DiffConfig(context.Context, *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
}

func (s *server) Configure(context.Context, *pulumirpc.ConfigureRequest) (*pulumirpc.ConfigureResponse, error) {
	return &pulumirpc.ConfigureResponse{AcceptSecrets: true, SupportsPreview: true, AcceptResources: true}, nil
}

func (s *server) Check(_ context.Context, r *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	return &pulumirpc.CheckResponse{Inputs: r.GetNews()}, nil
}

func (s *server) Diff(_ context.Context, r *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	olds, err := plugin.UnmarshalProperties(r.GetOldInputs(), opts)
	if err != nil {
		return nil, err
	}
	if len(olds) == 0 {
		if olds, err = plugin.UnmarshalProperties(r.GetOlds(), opts); err != nil {
			return nil, err
		}
	}
	news, err := plugin.UnmarshalProperties(r.GetNews(), opts)
	if err != nil {
		return nil, err
	}
	typ := string(resource.URN(r.GetUrn()).Type())
	var diffs, replaces []string
	keys := map[resource.PropertyKey]bool{}
	for k := range olds {
		keys[k] = true
	}
	for k := range news {
		keys[k] = true
	}
	for k := range keys {
		o, n := olds[k], news[k]
		if !n.ContainsUnknowns() && o.DeepEquals(n) {
			continue
		}
		diffs = append(diffs, string(k))
		if slices.Contains(forceNew[typ], string(k)) {
			replaces = append(replaces, string(k))
		}
	}
	sort.Strings(diffs)
	sort.Strings(replaces)
	changes := pulumirpc.DiffResponse_DIFF_NONE
	if len(diffs) > 0 {
		changes = pulumirpc.DiffResponse_DIFF_SOME
	}
	return &pulumirpc.DiffResponse{Changes: changes, Diffs: diffs, Replaces: replaces}, nil
}

// computed adds the outputs the program reads that AWS makes up.
func computed(typ, name string, props resource.PropertyMap, preview bool) (string, resource.PropertyMap) {
	out := props.Copy()
	sum := sha256.Sum256([]byte(typ + "/" + name))
	suffix := hex.EncodeToString(sum[:])[:17]
	val := func(s string) resource.PropertyValue {
		if preview {
			return resource.MakeComputed(resource.NewStringProperty(""))
		}
		return resource.NewStringProperty(s)
	}
	id := "standin-" + suffix
	switch typ {
	case "aws:ec2/instance:Instance":
		id = "i-" + suffix
		out["publicIp"] = val(fmt.Sprintf("198.51.100.%d", 10+int(sum[0])%200))
		out["privateIp"] = val(fmt.Sprintf("10.42.1.%d", 10+int(sum[1])%200))
	case "aws:ebs/volume:Volume":
		id = "vol-" + suffix
	case "aws:ec2/placementGroup:PlacementGroup":
		out["name"] = val(name + "-" + suffix[:6])
	case "aws:ec2/keyPair:KeyPair":
		out["keyName"] = val(name + "-" + suffix[:6])
	case "aws:s3/bucketV2:BucketV2":
		bucket := props["bucketPrefix"].StringValue() + suffix[:8]
		out["bucket"] = val(bucket)
		id = bucket
	}
	return id, out
}

func (s *server) Create(_ context.Context, r *pulumirpc.CreateRequest) (*pulumirpc.CreateResponse, error) {
	props, err := plugin.UnmarshalProperties(r.GetProperties(), opts)
	if err != nil {
		return nil, err
	}
	u := resource.URN(r.GetUrn())
	id, out := computed(string(u.Type()), u.Name(), props, r.GetPreview())
	if !r.GetPreview() {
		s.record("create", r.GetUrn())
	} else {
		id = ""
	}
	st, err := plugin.MarshalProperties(out, opts)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CreateResponse{Id: id, Properties: st}, nil
}

func (s *server) Read(_ context.Context, r *pulumirpc.ReadRequest) (*pulumirpc.ReadResponse, error) {
	return &pulumirpc.ReadResponse{Id: r.GetId(), Properties: r.GetProperties(), Inputs: r.GetInputs()}, nil
}

func (s *server) Update(_ context.Context, r *pulumirpc.UpdateRequest) (*pulumirpc.UpdateResponse, error) {
	news, err := plugin.UnmarshalProperties(r.GetNews(), opts)
	if err != nil {
		return nil, err
	}
	olds, err := plugin.UnmarshalProperties(r.GetOlds(), opts)
	if err != nil {
		return nil, err
	}
	out := news.Copy()
	for _, k := range []resource.PropertyKey{"publicIp", "privateIp", "name", "keyName", "bucket"} {
		if v, ok := olds[k]; ok {
			if _, set := out[k]; !set {
				out[k] = v
			}
		}
	}
	if !r.GetPreview() {
		s.record("update", r.GetUrn())
	}
	st, err := plugin.MarshalProperties(out, opts)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.UpdateResponse{Properties: st}, nil
}

func (s *server) Delete(_ context.Context, r *pulumirpc.DeleteRequest) (*emptypb.Empty, error) {
	s.record("delete", r.GetUrn())
	return &emptypb.Empty{}, nil
}

func (s *server) Invoke(_ context.Context, r *pulumirpc.InvokeRequest) (*pulumirpc.InvokeResponse, error) {
	args, err := plugin.UnmarshalProperties(r.GetArgs(), opts)
	if err != nil {
		return nil, err
	}
	var ret resource.PropertyMap
	switch r.GetTok() {
	case "aws:ssm/getParameter:getParameter":
		name := args["name"].StringValue()
		ret = resource.PropertyMap{
			"name": resource.NewStringProperty(name), "type": resource.NewStringProperty("String"),
			"value": resource.NewStringProperty("ami-0standin00000001"), "insecureValue": resource.NewStringProperty("ami-0standin00000001"),
			"id": resource.NewStringProperty(name), "arn": resource.NewStringProperty("arn:aws:ssm:::parameter" + name),
			"version": resource.NewNumberProperty(1), "withDecryption": resource.NewBoolProperty(true),
		}
	case "aws:ec2/getAmi:getAmi":
		ret = resource.PropertyMap{"id": resource.NewStringProperty("ami-0standin00000001"), "architecture": resource.NewStringProperty("x86_64")}
	default:
		return nil, fmt.Errorf("the stand-in aws provider answers no invoke %s", r.GetTok())
	}
	st, err := plugin.MarshalProperties(ret, opts)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.InvokeResponse{Return: st}, nil
}
