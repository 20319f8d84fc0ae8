package runner

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/playbooks"
)

// ErrMemory classifies a run refused, by rig validate or before any engine started, because the
// book its servers hold would not fit in their hosts' memory.
var ErrMemory = errors.New("not enough memory for the run's book")

// MemoryHost is one machine that runs servers of a run, and the memory it has for them.
type MemoryHost struct {
	Servers        []string // the servers it runs, each holding the whole book
	AvailableBytes int64
	// Source says where AvailableBytes comes from, e.g. "MemAvailable in this machine's
	// /proc/meminfo" or "c7i.xlarge's memory (infra/spec instance table)".
	Source string
}

// CheckMemory says whether the book a run of pb preloads fits on every host: the engine's bytes
// per resting order (Engine.BytesPerOrder: its driver's measure, or engine.bytes_per_order) ×
// the preload's orders × the servers on the host, plus each server's recorder when the run
// records (RecordingBudgetOf: a Go engine's flight recorder), against the host's memory. It is the check
// docs/architecture.md ("Memory before a run") describes, made by rig validate on the target's
// hosts as it knows them and by the runner on the nodes' facts before any engine starts.
// checked is false when the engine does not say what an order costs; nothing is checked then.
func CheckMemory(pb *playbooks.Playbook, hosts []MemoryHost) (checked bool, err error) {
	per, source := pb.Engine.BytesPerOrder()
	if per <= 0 {
		return false, nil
	}
	orders := pb.Preload.Orders
	rec := RecordingBudgetOf(pb).MemoryBytes
	var errs []error
	for _, h := range hosts {
		n := len(h.Servers)
		if n == 0 || orders <= 0 && rec == 0 {
			continue
		}
		// In floating point: orders may be anything ParseCount takes, and the product must not wrap.
		book, recs := float64(max(orders, 0))*float64(per)*float64(n), float64(rec)*float64(n)
		if book+recs <= float64(h.AvailableBytes) {
			continue
		}
		who, times := h.Servers[0], ""
		if n > 1 {
			who = strings.Join(h.Servers, ", ") + " (one host)"
			times = fmt.Sprintf("%d servers × ", n)
		}
		also := ""
		if rec > 0 {
			also = fmt.Sprintf(", and the engines' flight recorders %s more (%s%s each, engine.recording: on)", memSize(recs), times, memSize(float64(rec)))
		}
		fit := int64(math.Floor((float64(h.AvailableBytes) - recs) / float64(per*int64(n))))
		errs = append(errs, fmt.Errorf("%s: the book needs about %s resident (%s%s orders × %d B/order, %s)%s; the host has %s (%s); at most %s orders fit",
			who, memSize(book), times, units.Group(strconv.FormatInt(orders, 10)), per, source, also,
			memSize(float64(h.AvailableBytes)), h.Source, units.Group(strconv.FormatInt(max(fit, 0), 10))))
	}
	if len(errs) > 0 {
		return true, fmt.Errorf("%w: %w", ErrMemory, errors.Join(errs...))
	}
	return true, nil
}

// memSize writes b in KiB, MiB, GiB or TiB, one decimal; past that in TiB with thousands grouped, so
// 99,999,999,999 orders still read as a size.
func memSize(b float64) string {
	switch {
	case b >= 1<<40:
		return units.Group(strconv.FormatFloat(b/(1<<40), 'f', 1, 64)) + " TiB"
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", b/(1<<10))
}

// checkMemory is CheckMemory on the nodes as they are, before any engine starts: servers are
// grouped by the host their facts name (every server of the local target shares one), each
// host's memory is its MemAvailable. A server whose facts are missing is left out, and the run
// says so.
func (r *run) checkMemory(nodeFacts map[string]facts.Facts) error {
	var hosts []MemoryHost
	byHost := map[string]int{}
	var unknown []string
	for _, n := range r.servers {
		f, ok := nodeFacts[n.Name]
		if !ok || f.MemAvailableBytes == 0 {
			unknown = append(unknown, n.Name)
			continue
		}
		key := f.Hostname
		if key == "" {
			key = n.Name
		}
		i, ok := byHost[key]
		if !ok {
			i = len(hosts)
			byHost[key] = i
			hosts = append(hosts, MemoryHost{AvailableBytes: int64(min(f.MemAvailableBytes, math.MaxInt64)),
				Source: "MemAvailable of " + key})
		}
		hosts[i].Servers = append(hosts[i].Servers, n.Name)
	}
	checked, err := CheckMemory(r.pb, hosts)
	switch {
	case !checked:
		r.progress("the %s engine does not say what a resting order costs (engine.bytes_per_order): memory for its book is not checked", r.pb.Engine.DriverName())
	case len(unknown) > 0:
		r.progress("memory of %s not known (no facts): its book is not checked there", strings.Join(unknown, ", "))
	}
	return err
}
