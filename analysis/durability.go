package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// Durability checks every acknowledged order (the load generator's ledger, rundir.AckedFile)
// against what each server held at the end of the run (<node>/orders.json, GET /orders): an
// acknowledged order the recovered cluster does not hold was lost, whatever the latency says.
type Durability struct {
	// Faults names what the timeline did to the servers: "power loss of node-1, node-2",
	// "kill -KILL of node-0", "partition of node-0 for 5s", "none".
	Faults    string `json:"faults"`
	SyncLevel *int   `json:"sync_level,omitempty"`
	Acked     int    `json:"acked"`
	// Lost: acknowledged orders fewer than a majority of the servers hold at the end (the cluster
	// after it recovered; its servers apply one log, so it is all or none of them once they agree).
	Lost int `json:"lost"`
	// Unchecked: acknowledged at or below the index of a snapshot every answering server restored
	// (orders.json lists only what was applied after it), or no server answered at all.
	Unchecked int `json:"unchecked"`
	// Check is what the servers' answers list (engine.HeldOrders.Check): "held orders" (the
	// service's own state) or "applied ingress" (the ingress messages each node applied); both
	// joined by " and " when servers differ. Empty when no server answered.
	Check   string                    `json:"check,omitempty"`
	Nodes   map[string]NodeDurability `json:"nodes"`
	LostIDs []uint64                  `json:"lost_ids,omitempty"` // the first maxLostIDs lost ids
}

// NodeDurability is one server's answer: how many acknowledged orders it holds, lacks, and cannot
// say (acknowledged at or below its restored snapshot). Missing: no orders.json (the node was
// down at the end, or its engine has no GET /orders).
type NodeDurability struct {
	Held    int  `json:"held"`
	Lost    int  `json:"lost"`
	Unknown int  `json:"unknown"`
	Missing bool `json:"missing,omitempty"`
}

const maxLostIDs = 20

// durability is nil for a run folder without a ledger (older runs, or no probe stream).
func (d *runData) durability(s *Summary) (*Durability, []string) {
	acked, err := d.readAcked()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []string{fmt.Sprintf("acknowledged-order ledger: %v: durability not checked", err)}
	}
	out := &Durability{Faults: d.faults(), SyncLevel: s.Settings.SyncLevel, Acked: len(acked), Nodes: map[string]NodeDurability{}}
	held := map[string]*engine.HeldOrders{}
	checks := map[string]bool{}
	for _, n := range d.nodes {
		var h engine.HeldOrders
		if err := d.readJSONFile(n+"/"+rundir.HeldOrdersFile, &h); err != nil {
			d.warnOutside(err)
			out.Nodes[n] = NodeDurability{Missing: true}
			continue
		}
		held[n] = &h
		checks[h.CheckOrDefault()] = true
	}
	out.Check = strings.Join(slices.Sorted(maps.Keys(checks)), " and ")
	var warn []string
	if len(held) == 0 {
		out.Unchecked = len(acked)
		return out, []string{"durability: no server said which orders it holds (no orders.json): the acknowledged orders are unchecked"}
	}
	majority := len(d.nodes)/2 + 1
	for _, a := range acked {
		have, unknown := 0, 0
		for n, h := range held {
			nd := out.Nodes[n]
			switch {
			case h.Holds(a.ID):
				nd.Held++
				have++
			case a.Index <= h.KnownFromIndex:
				nd.Unknown++
				unknown++
			default:
				nd.Lost++
			}
			out.Nodes[n] = nd
		}
		switch {
		case have >= majority:
		case have+unknown >= majority:
			out.Unchecked++
		default:
			out.Lost++
			if len(out.LostIDs) < maxLostIDs {
				out.LostIDs = append(out.LostIDs, a.ID)
			}
		}
	}
	if out.Lost > 0 {
		warn = append(warn, fmt.Sprintf("durability: %d of %d acknowledged orders lost (%s, sync level %s)", out.Lost, out.Acked, out.Faults, syncCell(out.SyncLevel)))
	}
	return out, warn
}

// faults describes the timeline's kills, power losses and partitions, in order.
func (d *runData) faults() string {
	var parts []string
	for _, e := range d.events {
		if f := d.kinds().Fault(e); f != "" {
			parts = append(parts, f)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// checkCell says what the durability check compared the ledger with.
func checkCell(c string) string {
	switch c {
	case "":
		return "nothing (no server answered)"
	case engine.CheckHeldOrders:
		return "the orders each server's state holds (" + c + ")"
	case engine.CheckAppliedIngress:
		return "the ingress messages each server applied, by correlation id (" + c + ")"
	}
	return c
}

func syncCell(l *int) string {
	if l == nil {
		return "?"
	}
	return fmt.Sprint(*l)
}

// readAcked reads the ledger, bounded by the answers stats.json declares; without a stats.json
// (a killed load generator) the memory check of rig report is its bound.
func (d *runData) readAcked() ([]rundir.Acked, error) {
	decl, err := d.run.DeclaredAcked()
	if err != nil {
		n, cerr := d.run.AckedRecords()
		if cerr != nil {
			return nil, cerr
		}
		decl = rundir.Declared{N: n, Source: "its own size (no readable loadgen/stats.json)"}
	}
	return d.run.Acked(decl)
}

func (d *runData) readJSONFile(name string, v any) error {
	b, err := d.run.ReadFile(name, path.Base(name), rundir.MaxJSONBytes)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
