package spec

// Stack output names. The program exports them; the rig's stack driver reads them.
const (
	OutputInventory = "inventory" // an object that decodes into inventory.Inventory
	OutputBucket    = "bucket"
	OutputExpiresAt = "expiresAt" // RFC 3339
	OutputRetain    = "retainBucket"
)

// SSM parameters of the latest x86_64 images (c6in and c7i are x86_64).
var AMIParameters = map[string]string{
	FamilyAL2023: "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64",
	FamilyUbuntu: "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
}
