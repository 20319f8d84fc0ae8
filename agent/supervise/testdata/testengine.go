//go:build ignore

// testengine is a test double of the engine contract (docs/architecture.md, "Engine contract")
// for the supervisor's and the agent's unit tests: it reads the JSON config, serves GET /status
// and GET /changes on admin_addr with phases that advance on a timer, POST /snapshot and
// POST /step-down, and logs to stdout. The real engine is exercised by the end-to-end tests.
//
// Environment knobs:
//
//	TESTENGINE_PHASE=100ms   time spent in each phase before ready
//	TESTENGINE_DATA_BYTES=N  write a raft.db of N bytes into the data folder
//	TESTENGINE_CHILD=1       spawn a child process (writes its pid to <dir>/child.pid)
//	TESTENGINE_EXIT=3        exit with this code once ready
//	TESTENGINE_IGNORE_TERM=1 ignore SIGTERM (to test the supervisor's escalation to KILL)
//	TESTENGINE_PHASES=a,b,c  the phases before ready, in this order (default: starting,
//	                         restoring, replaying, catching-up); an out-of-order list makes an
//	                         engine that breaks the contract's phase order
//	TESTENGINE_NO_CHANGES=1  no GET /changes (an engine the agent must poll)
//	TESTENGINE_IGNORE=k=v,…  report setting k in effect as v, whatever the config file says (an
//	                         engine that ignores a setting)
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rig-dev/rig/engine"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		time.Sleep(time.Hour)
		return
	}
	// The supervisor runs "<binary> engine --config <file>" by default.
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "engine" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("testengine", flag.ExitOnError)
	cfgPath := fs.String("config", "", "config file")
	fs.Parse(args)
	b, err := os.ReadFile(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testengine:", err)
		os.Exit(2)
	}
	var cfg engine.Config
	var reported engine.Reported // every key of the config file, reported back as in effect
	if err := json.Unmarshal(b, &cfg); err == nil {
		err = json.Unmarshal(b, &reported)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testengine: config:", err)
		os.Exit(2)
	}
	// An engine that ignores a setting: it reports its own default, not what it was given.
	for _, kv := range strings.Split(os.Getenv("TESTENGINE_IGNORE"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			reported[k] = v
		}
	}
	phase := 100 * time.Millisecond
	if v := os.Getenv("TESTENGINE_PHASE"); v != "" {
		phase, _ = time.ParseDuration(v)
	}
	os.MkdirAll(cfg.Dir, 0o755)
	if n, _ := strconv.Atoi(os.Getenv("TESTENGINE_DATA_BYTES")); n > 0 {
		os.WriteFile(filepath.Join(cfg.Dir, "raft.db"), make([]byte, n), 0o644)
	}
	os.WriteFile(filepath.Join(cfg.Dir, "meta.json"), []byte(`{"small":true}`), 0o644)
	if os.Getenv("TESTENGINE_CHILD") == "1" {
		c := exec.Command(os.Args[0], "child")
		if err := c.Start(); err == nil {
			os.WriteFile("child.pid", []byte(strconv.Itoa(c.Process.Pid)), 0o644)
		}
	}

	start := time.Now()
	var mu sync.Mutex
	var snap *engine.Snapshot
	var index uint64 = 100
	steppedDown := false
	phases := []string{engine.PhaseStarting, engine.PhaseRestoring, engine.PhaseReplaying, engine.PhaseCatchingUp}
	if v := os.Getenv("TESTENGINE_PHASES"); v != "" {
		phases = strings.Split(v, ",")
	}
	status := func() engine.Status {
		mu.Lock()
		defer mu.Unlock()
		el := time.Since(start)
		ph, role := engine.PhaseReady, engine.RoleLeader
		if i := int(el / phase); i < len(phases) {
			ph, role = phases[i], engine.RoleFollower
		}
		if steppedDown {
			role = engine.RoleFollower
		}
		return engine.Status{Node: cfg.Node, Role: role, Phase: ph, Term: 1, CommitIndex: index,
			AppliedIndex: index, LastLogIndex: index, LastSnapshot: snap, PID: os.Getpid(),
			Started: start, Now: time.Now(), Config: reported}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("testengine: GET /status") // tests count these: a followed engine is not polled
		st := status()
		if r.URL.Query().Get("hash") == "1" {
			st.StateHash = fmt.Sprintf("hash-at-%d", st.AppliedIndex)
		}
		json.NewEncoder(w).Encode(st)
	})
	if os.Getenv("TESTENGINE_NO_CHANGES") != "1" {
		serveChanges(mux, status)
	}
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "testengine_up 1")
	})
	mux.HandleFunc("POST /snapshot", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		index += 10
		snap = &engine.Snapshot{Index: index, Term: 1, TakeMs: 1.5, PersistedMs: 2, Bytes: 4096}
		s := *snap
		mu.Unlock()
		fmt.Println("testengine: snapshot at", s.Index)
		json.NewEncoder(w).Encode(s)
	})
	mux.HandleFunc("POST /step-down", func(w http.ResponseWriter, r *http.Request) {
		if status().Role != engine.RoleLeader {
			http.Error(w, "not leader", http.StatusConflict)
			return
		}
		mu.Lock()
		steppedDown = true
		mu.Unlock()
		fmt.Fprintln(w, `{"ok":true}`)
	})
	// Signal handling is in place before the admin API answers: a supervisor that has seen a
	// status may signal at once.
	sigs := make(chan os.Signal, 1)
	if os.Getenv("TESTENGINE_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM)
	}
	srv := &http.Server{Addr: cfg.AdminAddr, Handler: mux}
	go func() {
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, "testengine: admin:", err)
			os.Exit(3)
		}
	}()
	fmt.Printf("testengine: node %s pid %d admin %s\n", cfg.Node, os.Getpid(), cfg.AdminAddr)
	fmt.Fprintln(os.Stderr, "testengine: stderr line")

	if os.Getenv("TESTENGINE_IGNORE_TERM") == "1" {
		fmt.Println("testengine: ignoring TERM")
		select {}
	}
	if code, err := strconv.Atoi(os.Getenv("TESTENGINE_EXIT")); err == nil {
		time.Sleep(time.Duration(len(phases)) * phase)
		fmt.Println("testengine: exiting with", code)
		os.Exit(code)
	}
	<-sigs
	fmt.Println("testengine: terminated")
	srv.Close()
}

// serveChanges serves GET /changes?since=&wait= from a check of status every 2 ms: every change
// of phase, role or snapshot index, kept whole (a test run is short).
func serveChanges(mux *http.ServeMux, status func() engine.Status) {
	var mu sync.Mutex
	var list []engine.Change
	var last time.Time
	wake := make(chan struct{})
	key := func(st engine.Status) string {
		k := st.Phase + "/" + st.Role
		if st.LastSnapshot != nil {
			k += "/" + strconv.FormatUint(st.LastSnapshot.Index, 10)
		}
		return k
	}
	go func() {
		for ; ; time.Sleep(2 * time.Millisecond) {
			st := status()
			mu.Lock()
			if n := len(list); n == 0 || key(list[n-1].Status) != key(st) {
				list = append(list, engine.Change{Version: uint64(n + 1), PrevCheck: last, Status: st})
				close(wake)
				wake = make(chan struct{})
			}
			last = st.Now
			mu.Unlock()
		}
	}()
	mux.HandleFunc("GET /changes", func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		deadline := time.After(wait)
		for {
			mu.Lock()
			out := engine.Changes{Version: uint64(len(list)), Changes: []engine.Change{}}
			if since < uint64(len(list)) {
				out.Changes = append(out.Changes, list[since:]...)
			}
			ch := wake
			mu.Unlock()
			if len(out.Changes) > 0 || wait == 0 {
				json.NewEncoder(w).Encode(out)
				return
			}
			select {
			case <-ch:
			case <-deadline:
				json.NewEncoder(w).Encode(out)
				return
			case <-r.Context().Done():
				return
			}
		}
	})
}
