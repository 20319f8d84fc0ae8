package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// POST /v1/power/cut -> PowerCutResponse: a power loss of a stack's node (docs/disks.md, "Power
// loss on a stack") is a reboot without sync: the agent answers, then writes "b" to the kernel's
// SysRq trigger, which restarts the machine at once, without syncing or unmounting anything, so
// what the page cache held unwritten is gone.
//
// Only an agent started with Options.SysrqTrigger can do it (`rig agent --sysrq-trigger`: the
// SSH target's staging passes /proc/sysrq-trigger on a stack's nodes, and an inventory's only
// when `rig run --sysrq-trigger` asks; target/ssh/power.go brings the node back): the local
// target's agents are started without one and refuse, so a power loss there can never reboot
// the machine the rig runs on; tests give a file of their own. Only the run holding the agent's
// lease may ask.

// PowerCutResponse says which boot the power was cut in: the controller knows the node is back
// when it reports another boot id.
type PowerCutResponse struct {
	BootID string `json:"boot_id"`
	Sysrq  string `json:"sysrq"` // kernel.sysrq as it was before the cut (the agent enables it)
}

// ErrNoPowerCut is a power cut asked of an agent started without a SysRq trigger.
var ErrNoPowerCut = errors.New("this agent cannot cut its node's power")

// powerCutDelay lets the answer leave before the machine stops: the controller learns the
// cut is under way (and the boot it left) instead of seeing a connection cut mid-request.
const powerCutDelay = 200 * time.Millisecond

// sysrqReboot is kernel.sysrq's bit for reboot/poweroff (the kernel's admin-guide/sysrq). That
// guide says the sysctl governs the keyboard, not the trigger file; the agent sets the bit
// anyway, so that a kernel that checks it for the file too cannot turn the cut into a no-op.
const sysrqReboot = 128

func (s *Server) registerPowerHandlers() {
	s.mux.HandleFunc("POST "+APIVersion+"/power/cut", s.handlePowerCut)
}

func (s *Server) handlePowerCut(w http.ResponseWriter, r *http.Request) {
	if s.opts.SysrqTrigger == "" {
		writeErr(w, http.StatusNotImplemented, fmt.Errorf("%w: it was started without --sysrq-trigger (a power loss on the local target is its disk model's)", ErrNoPowerCut))
		return
	}
	if !s.leaseHolderOnly(w, r, "a power cut") {
		return
	}
	boot, err := s.readProc("sys/kernel/random/boot_id")
	if err != nil {
		writeErr(w, http.StatusInternalServerError, fmt.Errorf("power cut: read the boot id: %w", err))
		return
	}
	prior, err := s.enableSysrq()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, fmt.Errorf("power cut: %w", err))
		return
	}
	// Opened now, so that a trigger that cannot be written fails the request, not the goroutine.
	f, err := os.OpenFile(s.opts.SysrqTrigger, os.O_WRONLY, 0)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, fmt.Errorf("power cut: %w", err))
		return
	}
	s.log.Warn("cutting the power: reboot without sync", "trigger", s.opts.SysrqTrigger, "boot_id", boot)
	writeJSON(w, http.StatusAccepted, PowerCutResponse{BootID: boot, Sysrq: prior})
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	go func() {
		defer f.Close()
		time.Sleep(powerCutDelay)
		if _, err := f.Write([]byte("b")); err != nil {
			s.log.Error("power cut: write the sysrq trigger", "trigger", s.opts.SysrqTrigger, "err", err)
		}
	}()
}

// readProc reads a file of the power cut's /proc (Options.PowerProc), trimmed.
func (s *Server) readProc(rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.powerProc(), rel))
	return strings.TrimSpace(string(b)), err
}

func (s *Server) powerProc() string {
	if s.opts.PowerProc != "" {
		return s.opts.PowerProc
	}
	return filepath.Join(s.opts.Root, "proc")
}

// enableSysrq sets kernel.sysrq's reboot bit when it is clear (0 is "all off"; 1 is "all on");
// it returns the value before.
func (s *Server) enableSysrq() (string, error) {
	prior, err := s.readProc("sys/kernel/sysrq")
	if err != nil {
		return "", fmt.Errorf("read kernel.sysrq: %w", err)
	}
	v, err := strconv.Atoi(prior)
	if err != nil {
		return prior, fmt.Errorf("kernel.sysrq is %q: want a number", prior)
	}
	if v == 1 || v&sysrqReboot != 0 {
		return prior, nil
	}
	if err := os.WriteFile(filepath.Join(s.powerProc(), "sys", "kernel", "sysrq"), []byte(strconv.Itoa(v|sysrqReboot)), 0o644); err != nil {
		return prior, fmt.Errorf("enable kernel.sysrq's reboot bit: %w", err)
	}
	return prior, nil
}

// PowerCut has the node reboot without sync (POST /v1/power/cut) and returns the boot it left.
// The node stops moments after the answer: every later request fails until it is back.
func (c *Client) PowerCut(ctx context.Context) (PowerCutResponse, error) {
	var out PowerCutResponse
	err := c.do(ctx, http.MethodPost, "/power/cut", nil, &out)
	return out, err
}
