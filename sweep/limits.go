package sweep

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/playbooks"
)

// Limits bound one controller session (an attempt) of a sweep: a deadline on the wall clock and
// a budget in US dollars at the target's price per hour. Zero values do not bound.
type Limits struct {
	Deadline     time.Time
	BudgetUSD    float64
	PricePerHour float64 // USD per hour of the cluster (infra/spec.EstimateCost); 0: unknown
}

// ErrOverLimit: the plan, or the next run, does not fit the deadline or the budget.
var ErrOverLimit = errors.New("over the limit")

// ParseUSD reads a budget: "20USD", "20 USD", "$20", "20.5".
func ParseUSD(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(t, "$")
	t = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(t, "USD"), "usd"))
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a finite amount of US dollars above 0, e.g. 20USD, $20 or 12.50", s)
	}
	return v, nil
}

// Cost is the cost of d at the limits' price per hour.
func (l Limits) Cost(d time.Duration) float64 { return d.Hours() * l.PricePerHour }

// Check says whether runs estimated to take need, started at now, fit the limits; the error
// names the limit, the estimate and by how much it is passed.
func (l Limits) Check(now time.Time, need time.Duration, what string) error {
	if !l.Deadline.IsZero() && now.Add(need).After(l.Deadline) {
		return fmt.Errorf("%w: %s take ~%s, ending ~%s, after the deadline %s (%s from now)", ErrOverLimit, what,
			need.Round(time.Second), now.Add(need).Format("15:04:05"), l.Deadline.Format("15:04:05"), l.Deadline.Sub(now).Round(time.Second))
	}
	if l.BudgetUSD > 0 && l.PricePerHour > 0 && l.Cost(need) > l.BudgetUSD {
		return fmt.Errorf("%w: %s take ~%s at $%.2f/h: ~$%.2f, over the budget of $%.2f", ErrOverLimit, what,
			need.Round(time.Second), l.PricePerHour, l.Cost(need), l.BudgetUSD)
	}
	return nil
}

// Need is the plan's estimate for the runs todo (0-based indexes), from pl.Estimates (its model
// and target).
func Need(pl *playbooks.Plan, todo []int) time.Duration {
	est := pl.Estimates()
	var d time.Duration
	for _, i := range todo {
		if i < len(est) { // a plan other than the sweep's is refused by Resume, not here
			d += est[i].Total
		}
	}
	return d
}

// SetLimits bounds the rest of this attempt: Begin refuses a run that would pass a limit, and the
// sweep stops there, resumable (rig run --resume).
func (t *Tracker) SetLimits(l Limits) {
	t.limits = l
	t.budgetFrom = t.now()
	t.Sweep.PricePerHour = l.PricePerHour
}

// checkLimit is Begin's check of the plan's i-th run against the limits: its estimate, scaled by
// how the finished runs of this attempt compared with theirs, after what this attempt spent.
func (t *Tracker) checkLimit(i int) error {
	l := t.limits
	if l.Deadline.IsZero() && l.BudgetUSD == 0 {
		return nil
	}
	need := t.runEstimate(i)
	if t.estimated > 0 {
		need = time.Duration(float64(need) * float64(t.spent) / float64(t.estimated))
	}
	now := t.now()
	spent := now.Sub(t.budgetFrom)
	lim := l
	if lim.BudgetUSD > 0 {
		lim.BudgetUSD -= l.Cost(spent)
	}
	if err := lim.Check(now, need, fmt.Sprintf("run %d/%d would", i+1, len(t.Sweep.Runs))); err != nil {
		if l.BudgetUSD > 0 && l.PricePerHour > 0 {
			err = fmt.Errorf("%w (spent ~$%.2f of $%.2f so far)", err, l.Cost(spent), l.BudgetUSD)
		}
		return err
	}
	return nil
}

// Pending are the plan runs (0-based) a resume of the sweep in dir would run: every run but those
// that ended ok. It changes nothing.
func Pending(dir string) ([]int, error) {
	sw, err := Read(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	for i, r := range sw.Runs {
		if _, ok := endedOK(dir, r); !ok {
			out = append(out, i)
		}
	}
	return out, nil
}
