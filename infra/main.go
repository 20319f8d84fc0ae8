// Command infra is the Pulumi program of the rig (Pulumi.yaml at the repository root points
// here). It stays thin: read the stack config, build the spec, deploy, export.
package main

import (
	"path/filepath"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/rig-dev/rig/infra/cluster"
	"github.com/rig-dev/rig/infra/spec"
)

func main() { pulumi.Run(program) }

// stackConfig reads Pulumi.<stack>.yaml from the project's root, as `rig validate` does, for the
// file:line:column of every refusal; the values themselves are the ones the engine hands over.
// nil when the engine names no root or the file cannot be read (the config lives elsewhere, or
// has a syntax error the engine would have refused first): refusals then name the key alone.
func stackConfig(ctx *pulumi.Context) *spec.StackConfig {
	root := ctx.RootDirectory()
	if root == "" {
		return nil
	}
	sc, err := spec.ReadStackConfig(filepath.Join(root, "Pulumi."+ctx.Stack()+".yaml"))
	if err != nil {
		return nil
	}
	return sc
}

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
	sc := stackConfig(ctx)
	s, probs := spec.Resolve(ctx.Stack(), region, raw)
	probs = cluster.Locate(probs, sc)
	if err := probs.Err(); err != nil {
		return err
	}
	for _, w := range probs.Warnings() {
		_ = ctx.Log.Warn(w.String(), nil)
	}
	out, err := cluster.Deploy(ctx, s, cluster.Options{Config: sc})
	if err != nil {
		return err
	}
	out.Export(ctx, s)
	return nil
}
