package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// ControlHandler serves a probe run's control API (`rig loadgen probe --control ADDR`):
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
		var spec BurstSpec
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

// ListenControl listens on a loopback address for the control API; anything else is refused,
// since the API has no authentication.
func ListenControl(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: control: %q: want 127.0.0.1:PORT", ErrBadOptions, addr)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: control: %q is not a loopback address (want 127.0.0.1:PORT or [::1]:PORT)", ErrBadOptions, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for control on %s: %w", addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("%w: control: %q resolved to %v, not a loopback address", ErrBadOptions, addr, ln.Addr())
	}
	return ln, nil
}
