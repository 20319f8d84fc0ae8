// Package plancheck holds a plan to what its target can give, before anything runs (rig
// validate): the memory a run's book needs and the data volumes it asks for. Each refusal is a
// playbooks.Problem placed at the value that asks (its matrix value when an axis varies it); what
// cannot be checked here is said as a note. It reads the target from a stack config or this
// machine and starts nothing.
package plancheck

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/runner"
	"github.com/rig-dev/rig/target/local"
)

// Hosts gives the hosts a run's servers land on, with the memory each has for them.
type Hosts func(servers int) []runner.MemoryHost

// MemoryHosts is where the books of a plan for stack ("": the local target) must fit: this
// machine's MemAvailable for the local target, where every server shares the host; for a stack,
// one server per instance of its server type, each with that type's memory from the instance
// table (infra/spec), read from sc or else Pulumi.<stack>.yaml. Nil when it cannot know; note
// then says why ("" when the stack config's own problems say it).
func MemoryHosts(sc *spec.StackConfig, stack string) (h Hosts, note string) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("node-%d", i)
		}
		return out
	}
	if stack == "" {
		_, avail, err := facts.Memory("/")
		if err != nil || avail == 0 {
			return nil, fmt.Sprintf("this machine's MemAvailable is not known (%v)", err)
		}
		return func(servers int) []runner.MemoryHost {
			return []runner.MemoryHost{{Servers: names(servers), AvailableBytes: int64(min(avail, math.MaxInt64)),
				Source: "MemAvailable in this machine's /proc/meminfo"}}
		}, ""
	}
	if sc == nil {
		path := "Pulumi." + stack + ".yaml"
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Sprintf("no %s here to name the stack's server instance type", path)
		}
		var err error
		if sc, err = spec.ReadStackConfig(path); err != nil {
			return nil, err.Error()
		}
	}
	s, probs := sc.Spec()
	it, ok := spec.LookupInstance(s.ServerInstanceType)
	if !ok || it.MemoryGiB == 0 {
		if len(probs.Errors()) > 0 {
			return nil, "" // the stack config's problems are listed with it
		}
		return nil, fmt.Sprintf("serverInstanceType %q is not in the instance table (infra/spec)", s.ServerInstanceType)
	}
	return func(servers int) []runner.MemoryHost {
		out := make([]runner.MemoryHost, servers)
		for i, n := range names(servers) {
			out[i] = runner.MemoryHost{Servers: []string{n}, AvailableBytes: int64(it.MemoryGiB) << 30,
				Source: fmt.Sprintf("the memory of a %s, %s's serverInstanceType (infra/spec instance table)", it.Name, sc.Path)}
		}
		return out
	}, ""
}

// Memory refuses a plan's runs whose book would not fit in their hosts' memory
// (runner.CheckMemory), each problem at the preload.orders that asks for the book, naming the
// run; checked says whether the engine says what a resting order costs (else nothing was).
func Memory(plan *playbooks.Plan, hosts Hosts) (probs playbooks.Problems, checked bool) {
	seen := map[string]bool{}
	for _, run := range plan.Runs {
		pb := run.Playbook
		ok, err := runner.CheckMemory(pb, hosts(pb.Cluster.Servers))
		checked = checked || ok
		if err == nil {
			continue
		}
		path := "preload.orders"
		if v, set := run.Settings[path]; set {
			path = At(plan, path, v)
		}
		msg := err.Error()
		if len(run.Settings) > 0 {
			msg += " (in the run with " + RunSettings(plan.Playbook.Matrix, run.Settings) + ")"
		}
		if seen[msg] {
			continue
		}
		seen[msg] = true
		probs = append(probs, playbooks.Problem{Pos: plan.Playbook.PosOf(path), Path: path, Msg: msg})
	}
	return probs, checked
}

// At is where value of key is given in plan's playbook: its place in the matrix when an axis
// varies key, else the key itself.
func At(plan *playbooks.Plan, key, value string) string {
	for _, ax := range plan.Playbook.Matrix {
		if i := slices.Index(ax.Values, value); ax.Key == key && i >= 0 {
			return fmt.Sprintf("matrix.%s[%d]", key, i)
		}
	}
	return key
}

// RunSettings writes a run's matrix values in axis order: "preload.orders=5M cluster.servers=5".
func RunSettings(axes []playbooks.Axis, settings map[string]string) string {
	var parts []string
	for _, ax := range axes {
		if v, ok := settings[ax.Key]; ok {
			parts = append(parts, ax.Key+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// VolumeSource is what a plan's disk.volume is held to: a stack's data volumes, named in its
// config (Where; "" when no stack config names them). A nil source is the local target's: no
// volumes.
type VolumeSource struct {
	Names []string
	Where string
}

// VolumeTarget reads the data volumes of the stack a plan is checked for: sc, or else
// Pulumi.<stack>.yaml; nil for the local target (no stack and no sc).
func VolumeTarget(sc *spec.StackConfig, stack string) *VolumeSource {
	if stack == "" && sc == nil {
		return nil
	}
	if sc == nil {
		path := "Pulumi." + stack + ".yaml"
		var err error
		if _, err = os.Stat(path); err == nil {
			sc, err = spec.ReadStackConfig(path)
		}
		if err != nil {
			return &VolumeSource{} // said by Volumes when the plan asks for a volume
		}
	}
	s, _ := sc.Spec() // its problems are listed with the stack config
	src := &VolumeSource{Where: sc.Path}
	for _, v := range s.Volumes() {
		src.Names = append(src.Names, v.Name)
	}
	return src
}

// Volumes refuses a disk.volume the target cannot give, placed at the value that asks for it;
// note says when it cannot be checked here.
func Volumes(ctx context.Context, plan *playbooks.Plan, src *VolumeSource) (probs playbooks.Problems, note string) {
	asked := runner.VolumesAsked(plan)
	if len(asked) == 0 {
		return nil, ""
	}
	pb := plan.Playbook
	pathOf := func(v string) string { return At(plan, "disk.volume", v) }
	// The problem names the field; the message need not say it again.
	msg := func(err error) string { return strings.TrimPrefix(err.Error(), runner.ErrDiskVolume.Error()+": ") }
	switch {
	case src == nil:
		err := runner.CheckVolumes(ctx, plan, local.New(local.Options{}))
		probs = append(probs, playbooks.Problem{Pos: pb.PosOf(pathOf(asked[0])), Path: pathOf(asked[0]), Msg: msg(err)})
	case src.Where == "":
		note = fmt.Sprintf("disk.volume %s is not checked: no stack config here names the stack's data volumes", strings.Join(asked, ", "))
	default:
		for _, v := range asked {
			if err := runner.CheckVolumeNames([]string{v}, map[string][]string{"every server": src.Names}, src.Where); err != nil {
				probs = append(probs, playbooks.Problem{Pos: pb.PosOf(pathOf(v)), Path: pathOf(v), Msg: msg(err)})
			}
		}
	}
	return probs, note
}
