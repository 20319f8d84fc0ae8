package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rig-dev/rig/internal/ctlsock"

	"github.com/rig-dev/rig/rundir"
)

// ControlHandler serves a probe run's control API (`rig loadgen probe --control SOCKET`):
//
//	POST /burst  {"messages": 50000, "every_ns": 1000000000, "count": 5}
//	             starts a burst series -> 202 {"started": true}; 400 bad body; 409 one is running;
//	             410 the run is ending
//	GET  /stats  ProbeStats so far (live)
//	POST /stop   ends the schedule now; the run waits out the grace period and writes
//	             everything -> 202
func ControlHandler(r *ProbeRun) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /burst", func(w http.ResponseWriter, req *http.Request) {
		var spec rundir.BurstSeries
		dec := json.NewDecoder(io.LimitReader(req.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			httpError(w, http.StatusBadRequest, fmt.Errorf("burst body: %w (want {\"messages\":N,\"every_ns\":NS,\"count\":N})", err))
			return
		}
		switch err := r.Burst(spec); {
		case err == nil:
			writeJSONResponse(w, http.StatusAccepted, map[string]any{"started": true, "burst": spec})
		case errors.Is(err, ErrBadOptions):
			httpError(w, http.StatusBadRequest, err)
		case errors.Is(err, ErrBurstBusy):
			httpError(w, http.StatusConflict, err)
		case errors.Is(err, errRunEnded):
			httpError(w, http.StatusGone, err)
		default:
			httpError(w, http.StatusInternalServerError, err)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, req *http.Request) {
		writeJSONResponse(w, http.StatusOK, r.Stats())
	})
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, req *http.Request) {
		r.Stop()
		writeJSONResponse(w, http.StatusAccepted, map[string]any{"stopping": true})
	})
	return mux
}

func httpError(w http.ResponseWriter, code int, err error) {
	writeJSONResponse(w, code, map[string]string{"error": err.Error()})
}

func writeJSONResponse(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// ListenControl listens for the control API on a Unix socket (an absolute path) in a folder
// only this user can enter (internal/ctlsock): the API has no authentication of its own, so the
// kernel's check on the folder is what keeps other users out. A TCP address is refused.
func ListenControl(path string) (net.Listener, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: control: %q: want the absolute path of a Unix socket (its folder is made 0700)", ErrBadOptions, path)
	}
	ln, err := ctlsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("load generator control: %w", err)
	}
	return ln, nil
}

// HoldPIDFile writes this process's pid to path (absolute) and returns what removes it: a pid
// file left behind would have the samplers follow whatever process gets the pid next.
func HoldPIDFile(path string) (func(), error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: pid_file: %q: want an absolute path", ErrBadOptions, path)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("load generator pid file: %w", err)
	}
	return func() { os.Remove(path) }, nil
}
