package playbooks

import (
	"errors"
	"fmt"
	"strings"
)

// CheckNodeRef checks a node reference (leader | follower | other-follower | node-N) against a
// cluster of servers servers: its form, and that the node it names can exist.
func CheckNodeRef(ref string, servers int) error {
	if err := checkNodeRef(ref); err != nil {
		return err
	}
	if msg := nodeExists(ref, servers); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// CheckSignal checks a kill's signal.
func CheckSignal(s string) error {
	if !contains(signals, s) {
		return fmt.Errorf("%q is not a signal a kill may send; want %s", s, strings.Join(signals, " or "))
	}
	return nil
}

// CheckPhase checks a wait_for's phase.
func CheckPhase(p string) error {
	if !contains(phases, p) {
		return fmt.Errorf("%q is not a phase; want one of %s", p, strings.Join(phases, ", "))
	}
	return nil
}
