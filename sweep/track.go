package sweep

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// Tracker keeps a sweep folder's sweep.json current while its plan runs, prints a progress line
// as each run starts, and writes the sweep report at the end.
type Tracker struct {
	Dir      string
	Sweep    *Sweep
	plan     *playbooks.Plan
	progress io.Writer
	now      func() time.Time

	started time.Time
	// Seconds spent on finished runs and the plan's estimate for them: their ratio scales the
	// estimate of the runs left (start-up, staging and preload are never in the estimate).
	spent, estimated time.Duration
	current          time.Time
}

// Start creates resultsDir/<sweep-id>/ for a plan of more than one run and writes its
// sweep.json. The id is the UTC start time and the playbook's name, as a run id is.
func Start(resultsDir string, pl *playbooks.Plan, name string, progress io.Writer) (*Tracker, error) {
	if err := os.MkdirAll(resultsDir, 0o755); err != nil {
		return nil, fmt.Errorf("create results folder: %w", err)
	}
	base := fmt.Sprintf("%s-%s", time.Now().UTC().Format("20060102-150405"), name)
	id, dir := base, filepath.Join(resultsDir, base)
	for i := 2; ; i++ { // two sweeps started in the same second must not share a folder
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create sweep folder: %w", err)
		}
		id = fmt.Sprintf("%s-%d", base, i)
		dir = filepath.Join(resultsDir, id)
	}
	t := &Tracker{Dir: dir, Sweep: New(id, pl), plan: pl, progress: progress, now: time.Now}
	t.started = t.now()
	if err := t.Sweep.Write(dir); err != nil {
		return nil, err
	}
	return t, nil
}

// RunDir is the folder of the plan's i-th run (0-based) and the run id to give it.
func (t *Tracker) RunDir(i int) (dir, runID string) {
	r := t.Sweep.Runs[i]
	return filepath.Join(t.Dir, r.Dir), t.Sweep.ID + "-" + r.Dir
}

// Begin prints "run k/N (settings), ETA" for the plan's i-th run (0-based).
func (t *Tracker) Begin(i int) {
	t.current = t.now()
	if t.progress == nil {
		return
	}
	r := t.Sweep.Runs[i]
	left := time.Duration(0)
	for _, pr := range t.plan.Runs[i:] {
		left += pr.Playbook.ExpectedDuration()
	}
	if t.estimated > 0 {
		left = time.Duration(float64(left) * float64(t.spent) / float64(t.estimated))
	}
	eta := "ETA " + t.current.Add(left).Format("15:04") + fmt.Sprintf(" (~%s left", left.Round(time.Second))
	if t.estimated == 0 {
		eta += ", from the plan's estimate without start-up"
	}
	eta += ")"
	fmt.Fprintf(t.progress, "[%s] run %d/%d (%s, round %d), %s\n", t.current.Format("15:04:05.000"), i+1, len(t.Sweep.Runs),
		Label(t.Sweep.Axes, r.Settings), r.Round, eta)
}

// End records the plan's i-th run (0-based) as ended with status and rewrites sweep.json.
func (t *Tracker) End(i int, runID, status string) error {
	t.Sweep.Runs[i].RunID, t.Sweep.Runs[i].Status = runID, status
	if !t.current.IsZero() {
		t.spent += t.now().Sub(t.current)
		t.estimated += t.plan.Runs[i].Playbook.ExpectedDuration()
	}
	return t.Sweep.Write(t.Dir)
}

// Finish marks the sweep ended, writes sweep.json and the sweep report, and prints the report's
// path. status is the sweep's: ok when every run ended ok, else failed or interrupted.
func (t *Tracker) Finish(status string) (string, error) {
	t.Sweep.Status, t.Sweep.Ended = status, t.now().UTC()
	if err := t.Sweep.Write(t.Dir); err != nil {
		return "", err
	}
	set, err := Load(t.Dir)
	if err != nil {
		return "", fmt.Errorf("read sweep back: %w", err)
	}
	path := filepath.Join(t.Dir, ReportName)
	if _, err := WriteReport(set, Options{}); err != nil {
		return path, fmt.Errorf("sweep report: %w", err)
	}
	if t.progress != nil {
		fmt.Fprintf(t.progress, "[%s] sweep %s: %s\n", t.now().Format("15:04:05.000"), t.Sweep.ID, path)
	}
	return path, nil
}

// Status is a sweep's status from its runs': interrupted if any was, else failed if any failed,
// else ok.
func Status(statuses []string) string {
	out := rundir.StatusOK
	for _, s := range statuses {
		switch s {
		case rundir.StatusInterrupted:
			return s
		case rundir.StatusOK:
		default:
			out = rundir.StatusFailed
		}
	}
	return out
}
