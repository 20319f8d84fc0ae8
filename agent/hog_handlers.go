package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rig-dev/rig/agent/hog"
	"github.com/rig-dev/rig/agent/supervise"
)

// CPU hog endpoints (the cpu_hog timeline action, actions/cpu_hog.go): a noisy neighbour on
// purpose, as a process of its own so the OS samples count it as another process.
//
//	POST /v1/hog                 hog.Request -> hog.State (started; 409 but for the lease's run)
//	POST /v1/hog/{pid}/end?wait= -> hog.State (waits up to wait for it to end by itself, then stops it)
//
// The agent starts its own executable as `rig agent hog` (hog.Main) in a process group of its
// own, at the request's nice, killed by the kernel if the agent dies (supervise.Spawn), and
// answers once it is spinning. A hog belongs to the run that started it and never outlives it:
// it ends by itself at its time, the agent kills it hogOverrun after that if it has not, any end
// of the run's lease (its release, its lapse, the agent stopping: lease.go) kills the run's hogs
// still running, and only that run may end one early.

// hogOverrun is how long past its time a hog may take to exit before the agent kills it.
const hogOverrun = 2 * time.Second

// hogReadyTimeout bounds the wait for a new hog's Ready line.
const hogReadyTimeout = 10 * time.Second

type hogSide struct {
	mu     sync.Mutex
	procs  map[int]*hogProc
	closed bool // the agent is stopping: no new hog
}

type hogProc struct {
	run    string // the run that started it: the only one that may end it
	cmd    *exec.Cmd
	done   chan struct{} // closed once reaped; st final
	mu     sync.Mutex
	st     hog.State
	exited bool // no signal to its group from here on: it is about to be reaped
	timer  *time.Timer
}

// hogArgs are what the agent runs for a hog after its executable: the hidden subcommand of the
// rig binary (cmd/rig/agent.go) and its settings.
func hogArgs(threads, nice int, d time.Duration) []string {
	return append([]string{"agent", "hog"}, hog.Args(threads, nice, d)...)
}

func (s *Server) registerHogHandlers() {
	s.hogs.procs = map[int]*hogProc{}
	s.mux.HandleFunc("POST "+APIVersion+"/hog", s.handleHogStart)
	s.mux.HandleFunc("POST "+APIVersion+"/hog/{pid}/end", s.handleHogEnd)
}

// leaseHolderOnly answers 409 and reports false unless the request comes from the run holding
// the agent's lease: what changes the node outside the run's engine (a power cut, a hog) is
// only ever that run's to ask.
func (s *Server) leaseHolderOnly(w http.ResponseWriter, r *http.Request, what string) bool {
	if run := r.Header.Get(HeaderRun); run == "" || run != s.lease.holder() {
		writeErr(w, http.StatusConflict, fmt.Errorf("%s needs the run holding this agent's lease (held by %q, asked by %q)", what, s.lease.holder(), run))
		return false
	}
	return true
}

func (s *Server) handleHogStart(w http.ResponseWriter, r *http.Request) {
	if !s.leaseHolderOnly(w, r, "a cpu hog") {
		return
	}
	var req hog.Request
	if err := readJSON(r, &req); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	d, err := req.Check()
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if req.Threads == 0 {
		req.Threads = runtime.NumCPU()
	}
	p, err := s.startHog(r.Header.Get(HeaderRun), req.Threads, req.Nice, d)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, p.state())
}

func (s *Server) startHog(run string, threads, nice int, d time.Duration) (*hogProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cpu hog: find own executable: %w", err)
	}
	cmd := exec.Command(exe, hogArgs(threads, nice, d)...)
	cmd.Dir = s.opts.Dir
	// A pipe of our own, not StdoutPipe: Wait closes that one, and a hog short enough to exit
	// before its Ready line is read would look as if it never got ready.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("cpu hog: %w", err)
	}
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	s.hogs.mu.Lock()
	if s.hogs.closed {
		s.hogs.mu.Unlock()
		return nil, errors.New("cpu hog: the agent is stopping")
	}
	// Checked again under the hogs' lock, with the registration below: a lease that ends from
	// here on finds this hog in the map and kills it (stopHogs), one that ended before starts none.
	if holder := s.lease.holder(); holder != run {
		s.hogs.mu.Unlock()
		return nil, fmt.Errorf("cpu hog: run %s no longer holds the lease (held by %q)", run, holder)
	}
	started := time.Now()
	err = supervise.Spawn(cmd)
	w.Close() // the hog holds its end
	if err != nil {
		s.hogs.mu.Unlock()
		stdout.Close()
		return nil, fmt.Errorf("cpu hog: start %s: %w", exe, err)
	}
	p := &hogProc{run: run, cmd: cmd, done: make(chan struct{}),
		st: hog.State{PID: cmd.Process.Pid, Threads: threads, Nice: nice, ForMs: float64(d) / 1e6, Started: started}}
	// Known from its start: an undo or the agent's exit while it gets ready kills it too.
	s.hogs.procs[p.st.PID] = p
	s.hogs.mu.Unlock()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == hog.Ready
		io.Copy(io.Discard, stdout)
		stdout.Close()
	}()
	go p.reap()
	fail := func(format string, args ...any) (*hogProc, error) {
		p.kill(true)
		<-p.done
		s.hogs.mu.Lock()
		delete(s.hogs.procs, p.st.PID)
		s.hogs.mu.Unlock()
		return nil, fmt.Errorf(format+": %s", append(args, strings.TrimSpace(stderr.String()))...)
	}
	select {
	case ok := <-ready:
		if !ok {
			return fail("cpu hog %s %s: exited before it was ready", exe, strings.Join(hogArgs(threads, nice, d), " "))
		}
	case <-time.After(hogReadyTimeout):
		return fail("cpu hog: not ready within %s", hogReadyTimeout)
	}
	// The hog ends by itself at its time; this is the guarantee that it does.
	p.mu.Lock()
	if !p.exited {
		p.timer = time.AfterFunc(time.Until(started.Add(d+hogOverrun)), func() {
			if p.kill(true) {
				s.log.Warn("cpu hog overran its time: killed", "pid", p.st.PID)
			}
		})
	}
	p.mu.Unlock()
	s.log.Info("cpu hog started", "pid", p.st.PID, "threads", threads, "nice", nice, "for", d)
	return p, nil
}

// reap waits for the hog's exit, closes its signal gate, reaps it and records how it ended.
func (p *hogProc) reap() {
	supervise.WaitExited(p.cmd.Process.Pid)
	ended := time.Now()
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	err := p.cmd.Wait()
	p.mu.Lock()
	p.st.Ended = ended
	p.st.Exit = p.cmd.ProcessState.String()
	if err != nil && p.cmd.ProcessState == nil {
		p.st.Exit = err.Error()
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	close(p.done)
}

// kill sends SIGKILL to the hog's process group unless it has exited; early marks it stopped
// before its time. It reports whether it sent the signal.
func (p *hogProc) kill(early bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return false
	}
	p.st.StoppedEarly = p.st.StoppedEarly || early
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	return true
}

func (p *hogProc) state() hog.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// maxHogEndWait bounds an end request's wait.
const maxHogEndWait = time.Minute

func (s *Server) handleHogEnd(w http.ResponseWriter, r *http.Request) {
	if !s.leaseHolderOnly(w, r, "ending a cpu hog") {
		return
	}
	pid, err := strconv.Atoi(r.PathValue("pid"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("hog pid %q: want a number", r.PathValue("pid")))
		return
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 || wait > maxHogEndWait {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("wait %q: want a Go duration from 0 to %s", v, maxHogEndWait))
			return
		}
	}
	run := r.Header.Get(HeaderRun)
	s.hogs.mu.Lock()
	p := s.hogs.procs[pid]
	s.hogs.mu.Unlock()
	if p == nil || p.run != run {
		writeErr(w, http.StatusNotFound, fmt.Errorf("no cpu hog %d of run %s on this agent", pid, run))
		return
	}
	select {
	case <-p.done:
	case <-time.After(wait):
		p.kill(true)
		<-p.done
	case <-r.Context().Done():
		return
	}
	s.hogs.mu.Lock()
	delete(s.hogs.procs, pid)
	s.hogs.mu.Unlock()
	writeJSON(w, http.StatusOK, p.state())
}

// allRuns asks stopHogs for every run's hogs.
const allRuns = ""

// stopHogs kills run's hogs still running (every run's for allRuns) and waits for each to be
// reaped; closing refuses new ones (the agent is stopping). It returns how many it stopped.
func (s *Server) stopHogs(run string, closing bool) int {
	s.hogs.mu.Lock()
	s.hogs.closed = s.hogs.closed || closing
	var all []*hogProc
	for pid, p := range s.hogs.procs {
		if run == allRuns || p.run == run {
			all = append(all, p)
			delete(s.hogs.procs, pid)
		}
	}
	s.hogs.mu.Unlock()
	n := 0
	for _, p := range all {
		if p.kill(true) {
			n++
		}
		<-p.done
	}
	return n
}

// StartHog starts a CPU hog on the node (POST /v1/hog) and returns it as started.
func (c *Client) StartHog(ctx context.Context, req hog.Request) (hog.State, error) {
	var out hog.State
	err := c.do(ctx, http.MethodPost, "/hog", req, &out)
	return out, err
}

// EndHog waits up to wait for the hog pid to end by itself, stops it if it has not, and returns
// how it ended (POST /v1/hog/{pid}/end).
func (c *Client) EndHog(ctx context.Context, pid int, wait time.Duration) (hog.State, error) {
	var out hog.State
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/hog/%d/end?", pid)+url.Values{"wait": {wait.String()}}.Encode(), nil, &out)
	return out, err
}
