package driver

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Registry is the drivers a binary offers, by name. It is built once, where the binary starts,
// and handed down to whatever resolves a playbook's engine.driver, as roachtest hands its
// Registry to every test spec: no driver registers itself.
type Registry struct {
	byName map[string]Driver
}

// NewRegistry offers ds; two drivers of one name are a programming error and panic.
func NewRegistry(ds ...Driver) *Registry {
	r := &Registry{byName: map[string]Driver{}}
	for _, d := range ds {
		if _, dup := r.byName[d.Name()]; dup {
			panic("driver: two drivers named " + d.Name())
		}
		r.byName[d.Name()] = d
	}
	return r
}

// Lookup finds a driver by name.
func (r *Registry) Lookup(name string) (Driver, error) {
	if r != nil {
		if d, ok := r.byName[name]; ok {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%q is not an engine driver; want %s", name, strings.Join(r.Names(), " or "))
}

// Names lists the drivers offered, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(r.byName))
}
