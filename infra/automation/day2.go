package automation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"

	"github.com/rig-dev/rig/infra/spec"
)

// ErrExtend means a stack's expiry cannot be moved as asked.
var ErrExtend = errors.New("cannot extend")

// Extend moves a stack's expires-at by hours, from now if it has already passed: it raises
// rig:expiresInHours in Pulumi.<stack>.yaml and runs pulumi up, which rewrites the expires-at
// tag on every resource (only tags change; nothing is replaced). The tags are what `rig gc`
// reads from the cloud side, so the config alone would not do. It returns the new expiry.
func (d *Driver) Extend(ctx context.Context, name string, hours int) (time.Time, error) {
	if hours < 1 {
		return time.Time{}, fmt.Errorf("%w: --hours %d: want at least 1", ErrExtend, hours)
	}
	_, s, probs, err := d.LoadSpec(name)
	if err != nil {
		return time.Time{}, err
	}
	if err := probs.Err(); err != nil {
		return time.Time{}, err
	}
	if s.CreatedAt.IsZero() {
		return time.Time{}, fmt.Errorf("%w: %s has no rig:createdAt yet: rig up --stack %s first", ErrExtend, name, name)
	}
	from := s.ExpiresAt()
	if now := d.opts.Now(); now.After(from) {
		from = now
	}
	want := from.Add(time.Duration(hours) * time.Hour)
	total := int(math.Ceil(want.Sub(s.CreatedAt).Hours()))
	if total > spec.MaxExpiresInHours {
		room := spec.MaxExpiresInHours - int(math.Ceil(from.Sub(s.CreatedAt).Hours()))
		return time.Time{}, fmt.Errorf("%w: %s would live %d h after its creation; rig:expiresInHours allows %d (at most --hours %d now)",
			ErrExtend, name, total, spec.MaxExpiresInHours, max(room, 0))
	}
	if err := d.opts.CheckCredentials(ctx, Target(s)); err != nil {
		return time.Time{}, err
	}
	st, err := d.selectStack(ctx, name)
	if err != nil {
		return time.Time{}, err
	}
	if err := st.SetConfig(ctx, spec.Namespace+":expiresInHours", auto.ConfigValue{Value: fmt.Sprint(total)}); err != nil {
		return time.Time{}, fmt.Errorf("set rig:expiresInHours of %s: %w", name, err)
	}
	newExp := s.CreatedAt.Add(time.Duration(total) * time.Hour)
	fmt.Fprintf(d.opts.Out, "rig: %s expires at %s (was %s); retagging its resources with pulumi up\n",
		name, newExp.Format(time.RFC3339), s.ExpiresAt().Format(time.RFC3339))
	if _, err := st.Up(ctx, optup.ProgressStreams(d.opts.Out), optup.ErrorProgressStreams(d.opts.Out)); err != nil {
		return time.Time{}, fmt.Errorf("pulumi up %s (retag): %w", name, err)
	}
	return newExp, nil
}

// Regions lists the AWS regions of every Pulumi.<stack>.yaml in the project, plus extra: where
// the rig may have created something.
func (d *Driver) Regions(extra []string) []string {
	seen := map[string]bool{}
	for _, g := range d.Accounts(extra) {
		for _, r := range g.Regions {
			seen[r] = true
		}
	}
	var out []string
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Account is one AWS account to scan, by the profile the stack configs name ("" for the default
// chain), with the regions its stacks use.
type Account struct {
	Profile string
	Regions []string
}

// Accounts groups the regions of every Pulumi.<stack>.yaml by its aws:profile; extra regions
// go with the default chain. Sorted by profile, regions sorted.
func (d *Driver) Accounts(extra []string) []Account {
	seen := map[string]map[string]bool{}
	add := func(profile, region string) {
		if seen[profile] == nil {
			seen[profile] = map[string]bool{}
		}
		seen[profile][region] = true
	}
	for _, r := range extra {
		add("", r)
	}
	files, _ := filepath.Glob(filepath.Join(d.opts.ProjectDir, "Pulumi.*.yaml"))
	for _, f := range files {
		if sc, err := spec.ReadStackConfig(f); err == nil && sc.Region != "" {
			add(sc.Profile, sc.Region)
		}
	}
	var out []Account
	for p, rs := range seen {
		a := Account{Profile: p}
		for r := range rs {
			a.Regions = append(a.Regions, r)
		}
		sort.Strings(a.Regions)
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Profile < out[j].Profile })
	return out
}

// Identity is what tells one stack's cluster from another's of the same name.
type Identity struct {
	Generation string // rig:generation; "" before the first up (or made before generations)
	Owner      string // rig:owner
}

// KnownStacks are the stacks of this backend, with the generation and owner their stack configs
// hold: resources of those generations are Pulumi's to destroy.
func (d *Driver) KnownStacks(ctx context.Context) (map[string]Identity, error) {
	st, err := d.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Identity{}
	for _, s := range st {
		var id Identity
		if sc, err := spec.ReadStackConfig(d.StackConfigPath(s.Name)); err == nil {
			id.Generation, id.Owner = sc.Values["generation"], sc.Values["owner"]
		}
		out[s.Name] = id
	}
	return out, nil
}

// Owners are the rig:owner values of every Pulumi.<stack>.yaml in the project: the people whose
// resources gc may delete from here.
func (d *Driver) Owners() map[string]bool {
	out := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(d.opts.ProjectDir, "Pulumi.*.yaml"))
	for _, f := range files {
		if sc, err := spec.ReadStackConfig(f); err == nil && sc.Values["owner"] != "" {
			out[sc.Values["owner"]] = true
		}
	}
	return out
}
