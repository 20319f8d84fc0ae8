package sweep

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/playbooks/estimate"
	"github.com/rig-dev/rig/rundir"
)

// Tracker keeps a sweep folder's sweep.json current while its plan runs, prints a progress line
// as each run starts, and writes the sweep report at the end. It holds the sweep folder's lock
// (LockFile) from Start or Resume to Finish, so two controllers never run one sweep.
type Tracker struct {
	Dir        string
	Sweep      *Sweep
	plan       *playbooks.Plan
	progress   io.Writer
	now        func() time.Time
	lock       *os.File
	kept       map[int]bool        // runs an earlier attempt ended ok (Resume): not run again
	limits     Limits              // SetLimits
	budgetFrom time.Time           // when the limits were set: what this attempt spends counts from there
	estimates  []estimate.Estimate // plan.Estimates(), taken once

	started time.Time
	// Seconds spent on finished runs and the plan's estimate for them: their ratio scales the
	// estimate of the runs left (start-up, staging and preload are never in the estimate).
	spent, estimated time.Duration
	current          time.Time
}

// StartOptions say where a sweep runs and where its progress lines go.
type StartOptions struct {
	Progress io.Writer
	Target   string // target.Target.Name()
	Stack    string // the Pulumi stack (rig run --stack), "" otherwise
}

// LockFile is locked (flock) by the controller running the sweep; the kernel lets go of it when
// that process ends, however it ends.
const LockFile = ".lock"

// Start creates resultsDir/<sweep-id>/ for a plan of more than one run and writes its
// sweep.json. The id is the UTC start time and the playbook's name, as a run id is. The folder
// appears with its sweep.json in it (made under a temporary name, then renamed), so a controller
// killed at any instant leaves no sweep folder without one.
func Start(resultsDir string, pl *playbooks.Plan, name string, o StartOptions) (*Tracker, error) {
	if err := os.MkdirAll(resultsDir, 0o755); err != nil {
		return nil, fmt.Errorf("create results folder: %w", err)
	}
	tmp, err := os.MkdirTemp(resultsDir, ".sweep-")
	if err != nil {
		return nil, fmt.Errorf("create sweep folder: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("create sweep folder: %w", err)
	}
	base := fmt.Sprintf("%s-%s", time.Now().UTC().Format("20060102-150405"), name)
	id, dir := base, filepath.Join(resultsDir, base)
	var sw *Sweep
	for i := 2; ; i++ { // two sweeps started in the same second must not share a folder
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			if sw, err = New(id, pl, o); err != nil {
				return nil, err
			}
			if err := sw.Write(tmp); err != nil {
				return nil, err
			}
			err := os.Rename(tmp, dir)
			if err == nil {
				break
			}
			if !errors.Is(err, os.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
				return nil, fmt.Errorf("create sweep folder: %w", err)
			}
		}
		id = fmt.Sprintf("%s-%d", base, i)
		dir = filepath.Join(resultsDir, id)
	}
	if err := atomicfile.SyncDir(resultsDir); err != nil {
		return nil, fmt.Errorf("create sweep folder: %w", err)
	}
	t := &Tracker{Dir: dir, Sweep: sw, plan: pl, progress: o.Progress, now: time.Now}
	t.started = t.now()
	if t.lock, err = lockSweep(dir); err != nil {
		return nil, err
	}
	return t, nil
}

// ErrLocked: another controller is running the sweep.
var ErrLocked = errors.New("another controller is running this sweep")

func lockSweep(dir string) (*os.File, error) {
	// Through an os.Root of the folder: a .lock symlinked out of it is not created or locked there.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("lock sweep folder: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock sweep folder: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w (it holds %s)", dir, ErrLocked, LockFile)
		}
		return nil, fmt.Errorf("lock sweep folder: %w", err)
	}
	return f, nil
}

// attempt is the attempt this tracker runs.
func (t *Tracker) attempt() *Attempt {
	if len(t.Sweep.Attempts) == 0 { // a sweep.json from before attempts were recorded
		t.Sweep.Attempts = []Attempt{{N: 1, Started: t.Sweep.Started, Status: rundir.StatusRunning, Rig: t.Sweep.Rig}}
	}
	return &t.Sweep.Attempts[len(t.Sweep.Attempts)-1]
}

// Kept reports whether the plan's i-th run (0-based) ended ok in an earlier attempt: a resumed
// sweep does not run it again.
func (t *Tracker) Kept(i int) bool { return t.kept[i] }

// RunDir is the folder of the plan's i-th run (0-based) and the run id to give it: <sweep-id>-rNN,
// and from the second attempt on <sweep-id>-rNN-aN (agents refuse a lapsed run's id).
func (t *Tracker) RunDir(i int) (dir, runID string) {
	r := t.Sweep.Runs[i]
	id := t.Sweep.ID + "-" + r.Dir
	if r.Attempt > 1 {
		id += fmt.Sprintf("-a%d", r.Attempt)
	}
	return filepath.Join(t.Dir, r.Dir), id
}

// Begin records in sweep.json that the plan's i-th run (0-based) starts in this attempt, before
// its folder exists, and prints "run k/N (settings), ETA".
//
// A run that would pass the deadline or the budget (SetLimits) is not begun: Begin records why in
// the attempt and returns an error matching ErrOverLimit; the sweep is left resumable.
func (t *Tracker) Begin(i int) error {
	a := t.attempt()
	if err := t.checkLimit(i); err != nil {
		a.Stopped = err.Error()
		if werr := t.Sweep.Write(t.Dir); werr != nil {
			return errors.Join(err, werr)
		}
		if t.progress != nil {
			fmt.Fprintf(t.progress, "[%s] stopping before run %d/%d: %v; rig run --resume %s continues\n", t.now().Format("15:04:05.000"), i+1, len(t.Sweep.Runs), err, t.Dir)
		}
		return err
	}
	t.current = t.now()
	r := &t.Sweep.Runs[i]
	r.Attempt, r.Status, r.Started, r.Ended = a.N, rundir.StatusRunning, t.current.UTC(), time.Time{}
	_, r.RunID = t.RunDir(i)
	a.Ran = append(a.Ran, r.Dir)
	if err := t.Sweep.Write(t.Dir); err != nil {
		return err
	}
	if t.progress == nil {
		return nil
	}
	left := time.Duration(0)
	for j := i; j < len(t.plan.Runs); j++ {
		if !t.kept[j] {
			left += t.runEstimate(j)
		}
	}
	if t.estimated > 0 {
		left = time.Duration(float64(left) * float64(t.spent) / float64(t.estimated))
	}
	eta := "ETA " + t.current.Add(left).Format("15:04") + fmt.Sprintf(" (~%s left", left.Round(time.Second))
	if t.estimated == 0 {
		eta += ", from the plan's estimate without start-up"
	}
	eta += ")"
	att := ""
	if a.N > 1 {
		att = fmt.Sprintf(", attempt %d", a.N)
	}
	fmt.Fprintf(t.progress, "[%s] run %d/%d (%s, round %d%s), %s\n", t.current.Format("15:04:05.000"), i+1, len(t.Sweep.Runs),
		Label(t.Sweep.Axes, r.Settings), r.Round, att, eta)
	return nil
}

// End records the plan's i-th run (0-based) as ended with status and rewrites sweep.json.
func (t *Tracker) End(i int, runID, status string) error {
	t.Sweep.Runs[i].RunID, t.Sweep.Runs[i].Status, t.Sweep.Runs[i].Ended = runID, status, t.now().UTC()
	if !t.current.IsZero() {
		t.spent += t.now().Sub(t.current)
		t.estimated += t.runEstimate(i)
	}
	return t.Sweep.Write(t.Dir)
}

// runEstimate is the plan's estimate of its i-th run (playbooks.Plan.Estimates: its model and
// target, stored books counted), the one figure ETAs and limits scale.
func (t *Tracker) runEstimate(i int) time.Duration {
	if t.estimates == nil {
		t.estimates = t.plan.Estimates()
	}
	return t.estimates[i].Total
}

// Finish marks the sweep ended, writes sweep.json and the sweep report, and prints the report's
// path. status is the sweep's: ok when every run ended ok, else failed or interrupted.
func (t *Tracker) Finish(status string) (string, error) {
	if status == rundir.StatusOK {
		for _, r := range t.Sweep.Runs {
			if r.Status != rundir.StatusOK { // stopped before the end of the plan (a limit)
				status = rundir.StatusInterrupted
				break
			}
		}
	}
	t.Sweep.Status, t.Sweep.Ended = status, t.now().UTC()
	a := t.attempt()
	a.Status, a.Ended = status, t.Sweep.Ended
	if err := t.Sweep.Write(t.Dir); err != nil {
		return "", err
	}
	defer t.unlock()
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

func (t *Tracker) unlock() {
	if t.lock != nil {
		t.lock.Close() // releases the flock
		t.lock = nil
	}
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
