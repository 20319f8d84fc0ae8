// Package realpulumi runs the rig's Pulumi program (infra/cluster.Deploy, inline through the
// Automation API, as the Go language host is not served by the module proxy) through the real
// Pulumi engine, with a stand-in aws provider process (standin/) and a local file backend: no
// AWS, no network. Its test checks the counts of an up, a re-preview and a destroy, the engine's
// step list for a reordered rig:dataVolumes and for a move from the volume* keys (no attachment
// created before the one it replaces is deleted), replaced instances, the dependency edges of
// every instance, no key material in the state files, the order of a destroy, and a refusal
// located as `rig validate` locates it.
//
// It needs the pulumi CLI at the version of go.mod's sdk (v3.276.0), which run.sh builds from the
// Go module proxy; without it the test skips (docs/infra.md, "The real-Pulumi check").
package realpulumi
