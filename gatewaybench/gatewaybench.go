// Package gatewaybench measures what a command-driven engine's gateway adds to a message's
// latency (`rig bench gateway`): the load generator's probes over docs/wire.md through the
// node's gateway, against the engine's own in-process client (its --gateway-bench mode) sending
// the same orders straight into the cluster, both open loop at the same rates, interleaved in
// one run on one node.
package gatewaybench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/rig-dev/rig/agent/supervise"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/freeport"
	"github.com/rig-dev/rig/internal/loadavg"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/stats"
)

// GoalP50Us is the most the gateway may add to p50, in microseconds.
const GoalP50Us = 20

// ErrBadOptions classifies invalid options (the message names the field).
var ErrBadOptions = errors.New("bad gateway bench options")

// grace is how long each side awaits answers after its schedule (the client's GRACE_NS).
const grace = 10 * time.Second

// ResultMark starts the client's result lines on its standard output (the harness's
// GatewayBench.MARK); everything else there is the node's log.
const ResultMark = "rig-gateway-bench "

// How the engine's own client waits between messages (GatewayBench's IDLE).
const (
	IdleBackoff = "backoff" // as the gateway's cluster-client thread waits
	IdleSpin    = "spin"    // never parks: the floor
)

// Options configure a bench.
type Options struct {
	Playbook   *playbooks.Playbook // a command-driven engine's playbook (engine.command)
	ClientArgs []string            // after engine.command.binary: starts the engine's own client on a node's config file, which follows
	Rates      []float64           // messages per second
	For        time.Duration       // each phase's schedule
	Warmup     time.Duration       // one unmeasured phase per side at the highest rate first
	Takes      int                 // phases per (rate, side)
	Spin       time.Duration       // both senders' busy-wait before each message is due (the load generator's load.spin)
	ClientIdle string              // how the engine's client waits for egress: IdleBackoff (as the gateway's thread) or IdleSpin
	Dir        string              // scratch folder (node data, logs, probe files)
	Logger     *slog.Logger
}

func (o *Options) check() error {
	if o.Playbook == nil || o.Playbook.Engine.Command == nil {
		return fmt.Errorf("%w: playbook: want one whose engine has a command (engine.command: a command-driven engine with a gateway)", ErrBadOptions)
	}
	if len(o.ClientArgs) == 0 {
		return fmt.Errorf("%w: client args: none (want the arguments that start the engine's own client, e.g. --gateway-bench)", ErrBadOptions)
	}
	if len(o.Rates) == 0 {
		return fmt.Errorf("%w: rates: none", ErrBadOptions)
	}
	for _, r := range o.Rates {
		if !(r >= 1 && r <= 200_000) {
			return fmt.Errorf("%w: rate %g/s: want 1/s..200k/s", ErrBadOptions, r)
		}
	}
	if o.For < 100*time.Millisecond {
		return fmt.Errorf("%w: for %v: want at least 100ms", ErrBadOptions, o.For)
	}
	if o.ClientIdle == "" {
		o.ClientIdle = IdleBackoff
	}
	if o.ClientIdle != IdleBackoff && o.ClientIdle != IdleSpin {
		return fmt.Errorf("%w: client idle %q: want %s or %s", ErrBadOptions, o.ClientIdle, IdleBackoff, IdleSpin)
	}
	if o.Spin < 0 {
		return fmt.Errorf("%w: spin %v: want 0 or more", ErrBadOptions, o.Spin)
	}
	if o.Takes < 1 {
		return fmt.Errorf("%w: takes %d: want at least 1", ErrBadOptions, o.Takes)
	}
	if o.Dir == "" {
		return fmt.Errorf("%w: dir: none", ErrBadOptions)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Phase is one side's figures at one rate in one take.
type Phase struct {
	Take     int     `json:"take"`
	Sent     int64   `json:"sent"`
	Answered int64   `json:"answered"`
	Lost     int64   `json:"lost"` // not answered within the grace after the schedule: not in the percentiles
	P50Us    float64 `json:"p50_us"`
	P99Us    float64 `json:"p99_us"`
	MaxUs    float64 `json:"max_us"`
	LagP50Us float64 `json:"send_lag_p50_us"` // how late the sender sent (inside the latency)
	LagP99Us float64 `json:"send_lag_p99_us"`
	// CPUUsPerMsg is the CPU the node, the engine's client and this process (the load
	// generator) used over the phase, per message sent: less bent by a loaded machine than latency.
	CPUUsPerMsg float64 `json:"cpu_us_per_msg"`
}

// Side is one path's phases at one rate and their medians.
type Side struct {
	Phases      []Phase `json:"phases"`
	P50Us       float64 `json:"p50_us"` // median over the takes
	P99Us       float64 `json:"p99_us"`
	LagP50Us    float64 `json:"send_lag_p50_us"`
	Lost        int64   `json:"lost"` // over the takes
	CPUUsPerMsg float64 `json:"cpu_us_per_msg"`
}

// Point is one rate: both paths and what the gateway adds.
type Point struct {
	Rate       float64 `json:"rate"`
	Gateway    Side    `json:"gateway"` // load generator -> TCP -> gateway -> cluster client -> ingress, and back
	Client     Side    `json:"client"`  // the engine's own cluster client -> ingress, and back
	AddedP50Us float64 `json:"added_p50_us"`
	AddedP99Us float64 `json:"added_p99_us"`
	RatioP50   float64 `json:"ratio_p50"`
	RatioP99   float64 `json:"ratio_p99"`
	AddedCPUUs float64 `json:"added_cpu_us_per_msg"`
}

// Report is a bench's result.
type Report struct {
	Engine     string  `json:"engine"`
	Servers    int     `json:"servers"`
	ForS       float64 `json:"for_s"`
	Takes      int     `json:"takes"`
	SpinUs     float64 `json:"spin_us"`
	ClientIdle string  `json:"client_idle"`
	Points     []Point `json:"points"`
	GoalP50Us  float64 `json:"goal_p50_us"`
	MeetsGoal  bool    `json:"meets_goal"`
	// Loaded: the load average was above the CPU count at the start or the end, so the
	// latencies are the machine's queueing more than the gateway's: no verdict (MeetsGoal false).
	Loaded     bool    `json:"loaded"`
	Load1      float64 `json:"load1"`
	Load1After float64 `json:"load1_after"`
	CPUs       int     `json:"cpus"`
}

// Run starts one node of the playbook's engine, then runs each take: at each rate, one phase
// through the gateway and one through the engine's own client, alternating which goes first.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	if err := o.check(); err != nil {
		return rep, err
	}
	rep = Report{Engine: o.Playbook.Name, Servers: 1, ForS: o.For.Seconds(), Takes: o.Takes, SpinUs: float64(o.Spin) / 1e3, ClientIdle: o.ClientIdle,
		GoalP50Us: GoalP50Us, CPUs: runtime.NumCPU()}
	if la, err := loadavg.Read("/"); err == nil {
		rep.Load1 = la.Load1
	}
	n, err := startNode(ctx, o)
	if err != nil {
		return rep, err
	}
	defer func() {
		if serr := n.stop(); err == nil && serr != nil {
			err = fmt.Errorf("stop the engine: %w", serr)
		}
	}()
	top := slices.Max(o.Rates)
	// The first probe phase waits for the node to lead; it and the client's first phase warm
	// both paths' code up, unmeasured.
	warm := max(o.Warmup, 100*time.Millisecond)
	o.Logger.Info("warming up the gateway path (waits for a leader)", "rate", top, "for", warm)
	if _, err := probe(ctx, o, n, top, warm, "warmup"); err != nil {
		return rep, fmt.Errorf("warm-up through the gateway: %w", err)
	}
	cl, err := startClient(ctx, o, n)
	if err != nil {
		return rep, err
	}
	defer func() {
		if serr := cl.stop(); err == nil && serr != nil {
			err = fmt.Errorf("stop the engine's client: %w", serr)
		}
	}()
	o.Logger.Info("warming up the client path", "rate", top, "for", warm)
	if _, err := cl.phase(top, warm, o.Spin, o.ClientIdle); err != nil {
		return rep, fmt.Errorf("warm-up through the engine's client: %w", err)
	}
	rep.Points = make([]Point, len(o.Rates))
	for take := 1; take <= o.Takes; take++ {
		for i, rate := range o.Rates {
			pt := &rep.Points[i]
			pt.Rate = rate
			gatewayFirst := (take+i)%2 == 1
			for _, gw := range []bool{gatewayFirst, !gatewayFirst} {
				var ph Phase
				cpu0 := cpuSeconds(n.eng.PID(), cl.cmd.Process.Pid, os.Getpid())
				if gw {
					ph, err = probe(ctx, o, n, rate, o.For, fmt.Sprintf("take-%d-%g", take, rate))
					if err != nil {
						return rep, fmt.Errorf("take %d at %g/s through the gateway: %w", take, rate, err)
					}
					ph.Take = take
					pt.Gateway.Phases = append(pt.Gateway.Phases, ph)
				} else {
					if ph, err = cl.phase(rate, o.For, o.Spin, o.ClientIdle); err != nil {
						return rep, fmt.Errorf("take %d at %g/s through the engine's client: %w", take, rate, err)
					}
					ph.Take = take
					pt.Client.Phases = append(pt.Client.Phases, ph)
				}
				cpu := (cpuSeconds(n.eng.PID(), cl.cmd.Process.Pid, os.Getpid()) - cpu0) * 1e6 / float64(ph.Sent)
				if gw {
					pt.Gateway.Phases[len(pt.Gateway.Phases)-1].CPUUsPerMsg = cpu
				} else {
					pt.Client.Phases[len(pt.Client.Phases)-1].CPUUsPerMsg = cpu
				}
				o.Logger.Info("phase", "take", take, "rate", rate, "gateway", gw, "p50_us", ph.P50Us, "p99_us", ph.P99Us,
					"send_lag_p50_us", ph.LagP50Us, "cpu_us_per_msg", cpu, "answered", ph.Answered, "sent", ph.Sent, "lost", ph.Lost)
			}
		}
	}
	if la, err := loadavg.Read("/"); err == nil {
		rep.Load1After = la.Load1
	}
	rep.summarize()
	return rep, nil
}

func (r *Report) summarize() {
	r.MeetsGoal = len(r.Points) > 0
	for i := range r.Points {
		p := &r.Points[i]
		p.Gateway.summarize()
		p.Client.summarize()
		p.AddedP50Us = p.Gateway.P50Us - p.Client.P50Us
		p.AddedP99Us = p.Gateway.P99Us - p.Client.P99Us
		p.AddedCPUUs = p.Gateway.CPUUsPerMsg - p.Client.CPUUsPerMsg
		if p.Client.P50Us > 0 {
			p.RatioP50 = p.Gateway.P50Us / p.Client.P50Us
		}
		if p.Client.P99Us > 0 {
			p.RatioP99 = p.Gateway.P99Us / p.Client.P99Us
		}
		r.MeetsGoal = r.MeetsGoal && p.AddedP50Us <= GoalP50Us
	}
	r.Loaded = r.Load1 > float64(r.CPUs) || r.Load1After > float64(r.CPUs)
	r.MeetsGoal = r.MeetsGoal && !r.Loaded
}

func (s *Side) summarize() {
	var p50, p99, lag, cpu []float64
	for _, ph := range s.Phases {
		p50, p99, lag, cpu = append(p50, ph.P50Us), append(p99, ph.P99Us), append(lag, ph.LagP50Us), append(cpu, ph.CPUUsPerMsg)
		s.Lost += ph.Lost
	}
	s.P50Us, s.P99Us, s.LagP50Us, s.CPUUsPerMsg = stats.Median(p50), stats.Median(p99), stats.Median(lag), stats.Median(cpu)
}

// probe runs one phase of the load generator's probe stream through the node's gateway.
func probe(ctx context.Context, o Options, n *node, rate float64, d time.Duration, name string) (Phase, error) {
	out := filepath.Join(o.Dir, "probes", name)
	st, err := loadgen.Probe(ctx, loadgen.ProbeOptions{Servers: []string{n.clientAddr}, Rate: rate, Duration: d,
		Grace: grace, Out: out, Spin: o.Spin, StartTimeout: time.Minute, Logger: o.Logger})
	if err != nil {
		return Phase{}, err
	}
	os.RemoveAll(out)
	if st.Latency.N == 0 {
		return Phase{}, fmt.Errorf("none of %d probes answered", st.Sent)
	}
	return Phase{Sent: st.Sent, Answered: st.Answered, Lost: st.Lost, P50Us: us(st.Latency.P50Ns), P99Us: us(st.Latency.P99Ns), MaxUs: us(st.Latency.MaxNs),
		LagP50Us: us(st.SendLag.P50Ns), LagP99Us: us(st.SendLag.P99Ns)}, nil
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

// node is the one engine node under test.
type node struct {
	eng        *supervise.Engine
	binary     string
	configFile string
	clientAddr string
	env        []string // the client's: this process's, and what the engine's templates added
	dir        string
}

// startNode starts a one-node cluster of the playbook's engine on loopback as a run's agent
// does: the driver's settings prepared for the node, then agent/supervise renders the command,
// starts the process and watches it.
func startNode(ctx context.Context, o Options) (*node, error) {
	pb := o.Playbook
	var addrs [3]string
	for i := range addrs {
		a, err := freeport.Loopback()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	dir := filepath.Join(o.Dir, "node-0")
	cfg := engine.Config{Node: "node-0", Dir: filepath.Join(dir, "data"), RaftAddr: addrs[0], ClientAddr: addrs[1], AdminAddr: addrs[2],
		Bootstrap: true, Peers: []engine.Peer{{Node: "node-0", RaftAddr: addrs[0], ClientAddr: addrs[1]}}}
	drv, table, err := pb.Engine.Resolve()
	if err != nil {
		return nil, fmt.Errorf("engine driver: %w", err)
	}
	st, err := driver.Prepare(drv, table, pb.Engine.Settings(), cfg)
	if err != nil {
		return nil, err
	}
	spec := pb.Engine.Command.Spec
	eng, err := supervise.StartEngine(ctx, supervise.Spec{Config: cfg, Dir: dir, Command: &spec, Settings: st.Settings,
		AdminToken: rand.Text(), Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	configFile, env := eng.CommandRendered()
	n := &node{eng: eng, binary: eng.Spec().Binary, configFile: configFile, clientAddr: cfg.ClientAddr, env: append(os.Environ(), env...), dir: dir}
	o.Logger.Info("engine node started", "pid", eng.PID(), "client", cfg.ClientAddr, "log", eng.Spec().LogFile)
	return n, nil
}

// stop ends the node with TERM (KILL after 10 s) and fails where it did not end as asked: a
// node that crashed before the stop, or had to be killed, leaves the bench's figures in doubt.
func (n *node) stop() error {
	ctx := context.Background()
	st, err := n.eng.Stop(ctx, 10*time.Second)
	if cerr := n.eng.Close(ctx, time.Second); err == nil {
		err = cerr
	}
	if err == nil && st != nil && st.Signal != "TERM" && st.Code != 0 && st.Code != 128+int(syscall.SIGTERM) {
		err = fmt.Errorf("engine node ended %s, not by the stop's TERM (its log: %s)", st.Desc, n.eng.Spec().LogFile)
	}
	return err
}

// client is the engine's own cluster client, driven one phase per line.
type client struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	log   string
}

// clientResult is one line the client writes after ResultMark.
type clientResult struct {
	Ready      bool   `json:"ready"`
	Error      string `json:"error"`
	Sent       int64  `json:"sent"`
	Answered   int64  `json:"answered"`
	Rejected   int64  `json:"rejected"`
	P50Ns      int64  `json:"p50_ns"`
	P99Ns      int64  `json:"p99_ns"`
	MaxNs      int64  `json:"max_ns"`
	LagP50Ns   int64  `json:"lag_p50_ns"`
	LagP99Ns   int64  `json:"lag_p99_ns"`
	BackPressd int64  `json:"back_pressured"`
}

func startClient(ctx context.Context, o Options, n *node) (*client, error) {
	logPath := filepath.Join(n.dir, "client.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append(slices.Clone(o.ClientArgs), n.configFile)
	c := &client{cmd: exec.Command(n.binary, args...), lines: make(chan string, 16), log: logPath}
	c.cmd.Dir, c.cmd.Env, c.cmd.Stderr = n.dir, n.env, logf
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		logf.Close()
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start the engine's client (%s %s): %w", n.binary, strings.Join(args, " "), err)
	}
	go func() {
		defer logf.Close()
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), ResultMark); ok {
				c.lines <- rest
			} else {
				fmt.Fprintln(logf, sc.Text())
			}
		}
	}()
	o.Logger.Info("engine's client started", "pid", c.cmd.Process.Pid, "log", logPath)
	if _, err := c.result(time.Minute); err != nil {
		c.cmd.Process.Kill()
		c.stop() // reaps it
		return nil, fmt.Errorf("engine's client did not connect: %w", err)
	}
	return c, nil
}

// result waits for the client's next result line.
func (c *client) result(timeout time.Duration) (clientResult, error) {
	var r clientResult
	select {
	case line, ok := <-c.lines:
		if !ok {
			return r, fmt.Errorf("it exited (%v); its log ends:\n%s", c.cmd.Wait(), logTail(c.log, 2000))
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return r, fmt.Errorf("read its result %q: %w", line, err)
		}
		if r.Error != "" {
			return r, errors.New(r.Error)
		}
		return r, nil
	case <-time.After(timeout):
		return r, fmt.Errorf("no answer within %v; its log ends:\n%s", timeout, logTail(c.log, 2000))
	}
}

func (c *client) phase(rate float64, d, spin time.Duration, idle string) (Phase, error) {
	if _, err := fmt.Fprintf(c.in, "%g %g %d %s\n", rate, d.Seconds(), spin.Nanoseconds(), idle); err != nil {
		return Phase{}, fmt.Errorf("ask for a phase: %w", err)
	}
	r, err := c.result(d + 30*time.Second)
	if err != nil {
		return Phase{}, err
	}
	if r.Answered == 0 {
		return Phase{}, fmt.Errorf("none of %d messages answered", r.Sent)
	}
	return Phase{Sent: r.Sent, Answered: r.Answered, Lost: r.Sent - r.Answered, P50Us: us(r.P50Ns), P99Us: us(r.P99Ns), MaxUs: us(r.MaxNs),
		LagP50Us: us(r.LagP50Ns), LagP99Us: us(r.LagP99Ns)}, nil
}

// stop ends the client's input; it exits at its end.
func (c *client) stop() error {
	c.in.Close()
	done := make(chan error, 1)
	go func() {
		for range c.lines {
		}
		done <- c.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w; its log ends:\n%s", err, logTail(c.log, 2000))
		}
		return nil
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("did not end within 10s of its input's end: killed")
	}
}

// logTail is the last max bytes of the file at path (the bench's folder is removed at its end).
func logTail(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// cpuSeconds is the CPU time (user and system) the processes have used so far; one that cannot
// be read counts 0.
func cpuSeconds(pids ...int) float64 {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0
	}
	var total float64
	for _, pid := range pids {
		if p, err := fs.Proc(pid); err == nil {
			if st, err := p.Stat(); err == nil {
				total += st.CPUTime()
			}
		}
	}
	return total
}
