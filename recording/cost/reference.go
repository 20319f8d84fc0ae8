package cost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/freeport"
)

// ReferenceEngine starts the reference engine (`rig engine --config`) as its own processes, a
// cluster of Servers on loopback, with engine.Config.FlightRecorder on or off: the recorder a
// run turns on with engine.flight_recorder: true.
type ReferenceEngine struct {
	Binary    string // the rig binary
	Servers   int    // 1 or more voters
	SyncLevel int
	Window    string // engine.flight_recorder_window; empty: the engine's default
	// Windows starts a recording engine's recorder idle (flight_recorder_idle), switched at
	// POST /trace/start and /trace/stop by Running.Switch (Options.Windows).
	Windows bool
}

// Name implements Engine.
func (e ReferenceEngine) Name() string {
	w := e.Window
	if w == "" {
		w = "default window"
	}
	how := "throughout"
	if e.Windows {
		how = "around windows"
	}
	return fmt.Sprintf("reference engine, %d server(s), sync level %d, flight recorder (%s) %s", e.Servers, e.SyncLevel, w, how)
}

// Start implements Engine.
func (e ReferenceEngine) Start(ctx context.Context, dir string, recording bool) (Running, error) {
	if e.Servers < 1 {
		return Running{}, fmt.Errorf("%w: servers %d: want at least 1", ErrBadOptions, e.Servers)
	}
	tokenBytes := make([]byte, 16)
	rand.Read(tokenBytes)
	token := hex.EncodeToString(tokenBytes)
	var peers []engine.Peer
	var admins []string
	for i := range e.Servers {
		raftAddr, err := freeport.Loopback()
		if err != nil {
			return Running{}, err
		}
		client, err := freeport.Loopback()
		if err != nil {
			return Running{}, err
		}
		admin, err := freeport.Loopback()
		if err != nil {
			return Running{}, err
		}
		peers = append(peers, engine.Peer{Node: fmt.Sprintf("node-%d", i), RaftAddr: raftAddr, ClientAddr: client})
		admins = append(admins, admin)
	}
	var cmds []*exec.Cmd
	stop := func() error {
		var errs []error
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if err != nil && !(errors.As(err, &ee) && !ee.Exited()) { // killed by our signal is a stop
					errs = append(errs, err)
				}
			case <-time.After(10 * time.Second):
				c.Process.Kill()
				<-done
				errs = append(errs, fmt.Errorf("%s did not stop within 10s of SIGTERM: killed", c.Args[0]))
			}
		}
		return errors.Join(errs...)
	}
	var servers []string
	for i, p := range peers {
		cfg := engine.Config{Node: p.Node, Dir: filepath.Join(dir, p.Node, "data"), RaftAddr: p.RaftAddr, ClientAddr: p.ClientAddr,
			AdminAddr: admins[i], Peers: peers, Bootstrap: true, SyncLevel: e.SyncLevel,
			HeartbeatTimeout: "200ms", ElectionTimeout: "200ms", FlightRecorder: recording}
		if recording {
			cfg.FlightRecorderWindow, cfg.FlightRecorderIdle = e.Window, e.Windows
		}
		nodeDir := filepath.Join(dir, p.Node)
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			stop()
			return Running{}, err
		}
		b, _ := json.Marshal(cfg)
		cfgPath := filepath.Join(nodeDir, "engine.json")
		if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
			stop()
			return Running{}, err
		}
		logf, err := os.Create(filepath.Join(nodeDir, "engine.log"))
		if err != nil {
			stop()
			return Running{}, err
		}
		c := exec.Command(e.Binary, "engine", "--config", cfgPath)
		c.Env = append(os.Environ(), engine.AdminTokenEnv+"="+token)
		c.Stdout, c.Stderr = logf, logf
		err = c.Start()
		logf.Close() // the child holds its own descriptor
		if err != nil {
			stop()
			return Running{}, fmt.Errorf("start %s: %w", p.Node, err)
		}
		cmds = append(cmds, c)
		servers = append(servers, p.ClientAddr)
	}
	run := Running{Servers: servers, Stop: stop}
	if recording && e.Windows {
		run.Switch = adminSwitch{admins: admins, token: token}
	}
	if recording {
		run.Dump = func(ctx context.Context) (int64, error) {
			var total int64
			for _, a := range admins {
				n, err := fetchTrace(ctx, a, token)
				if err != nil {
					return total, err
				}
				total += n
			}
			return total, nil
		}
	}
	return run, nil
}

// fetchTrace reads one engine's GET /trace and returns its size.
func fetchTrace(ctx context.Context, admin, token string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+engine.AdminTrace, nil)
	if err != nil {
		return 0, err
	}
	engine.AuthorizeAdmin(req, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s%s: %s", admin, engine.AdminTrace, resp.Status)
	}
	return io.Copy(io.Discard, resp.Body)
}

// adminSwitch runs every engine's idle recorder through its admin API, as the agents do in a
// run with engine.recording: windows.
type adminSwitch struct {
	admins []string
	token  string
}

func (a adminSwitch) Start(ctx context.Context) error {
	for _, ad := range a.admins {
		if err := post(ctx, ad, engine.AdminTraceStart, a.token); err != nil {
			return err
		}
	}
	return nil
}

func (a adminSwitch) Dump(ctx context.Context, _ string, stop bool) error {
	for _, ad := range a.admins {
		if _, err := fetchTrace(ctx, ad, a.token); err != nil {
			return err
		}
		if stop {
			if err := post(ctx, ad, engine.AdminTraceStop, a.token); err != nil {
				return err
			}
		}
	}
	return nil
}

func post(ctx context.Context, admin, path, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+path, nil)
	if err != nil {
		return err
	}
	engine.AuthorizeAdmin(req, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s%s: %s", admin, path, resp.Status)
	}
	return nil
}
