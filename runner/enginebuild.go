package runner

import (
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// engineBuild says which engine build a run measures: the reference engine is this rig binary
// (`rig engine`), a command-driven engine its engine.command.binary (hashed when it is a file on
// this machine), labelled by rig run --engine-version and --engine-commit.
func engineBuild(pb *playbooks.Playbook, opts Options, rig rundir.BuildInfo) *rundir.EngineBuild {
	binary, reference := opts.Binary, pb.Engine.Command == nil
	if !reference {
		binary = pb.Engine.Command.Binary
	}
	return rundir.NewEngineBuild(pb.Engine.DriverName(), binary, opts.EngineVersion, opts.EngineCommit, rig, reference)
}
