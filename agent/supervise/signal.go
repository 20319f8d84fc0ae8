package supervise

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// ErrBadSignal classifies a signal name the agent does not send to engines.
var ErrBadSignal = errors.New("unsupported signal")

// signals the agent sends to an engine, by the short names playbooks use.
var signals = []struct {
	name string
	sig  syscall.Signal
}{
	{"KILL", syscall.SIGKILL},
	{"TERM", syscall.SIGTERM},
	{"INT", syscall.SIGINT},
	{"HUP", syscall.SIGHUP},
	{"QUIT", syscall.SIGQUIT},
	{"STOP", syscall.SIGSTOP},
	{"CONT", syscall.SIGCONT},
	{"USR1", syscall.SIGUSR1},
	{"USR2", syscall.SIGUSR2},
}

// ParseSignal accepts "KILL", "SIGKILL", "kill" or "9" (for the signals listed by SignalNames).
func ParseSignal(s string) (syscall.Signal, error) {
	u := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if n, err := strconv.Atoi(u); err == nil {
		for _, e := range signals {
			if int(e.sig) == n {
				return e.sig, nil
			}
		}
	}
	for _, e := range signals {
		if e.name == u {
			return e.sig, nil
		}
	}
	return 0, fmt.Errorf("%w %q: want one of %s", ErrBadSignal, s, strings.Join(SignalNames(), ", "))
}

// SignalNames lists the signals ParseSignal accepts.
func SignalNames() []string {
	out := make([]string, len(signals))
	for i, e := range signals {
		out[i] = e.name
	}
	return out
}

// SignalName is the short name of sig ("KILL"), or "SIG<n>" for one outside the table.
func SignalName(sig syscall.Signal) string {
	for _, e := range signals {
		if e.sig == sig {
			return e.name
		}
	}
	return "SIG" + strconv.Itoa(int(sig))
}
