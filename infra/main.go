// Command infra is the Pulumi program of the rig (Pulumi.yaml at the repository root points
// here). It stays thin: read the stack config, build the spec, deploy, export.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/rig-dev/rig/infra/cluster"
	"github.com/rig-dev/rig/infra/spec"
)

func main() { pulumi.Run(program) }

// program maps the stack config onto a spec, warns about what Validate only warns about (e.g. a
// volume above its instance's EBS baseline) and deploys.
func program(ctx *pulumi.Context) error {
	raw := map[string]string{}
	for _, k := range spec.Keys {
		if v, ok := ctx.GetConfig(spec.Namespace + ":" + k.Name); ok {
			raw[k.Name] = v
		}
	}
	region, _ := ctx.GetConfig("aws:region")
	s, probs := spec.Resolve(ctx.Stack(), region, raw)
	if err := probs.Err(); err != nil {
		return err
	}
	for _, w := range probs.Warnings() {
		_ = ctx.Log.Warn(w.String(), nil)
	}
	out, err := cluster.Deploy(ctx, s)
	if err != nil {
		return err
	}
	out.Export(ctx, s)
	return nil
}
