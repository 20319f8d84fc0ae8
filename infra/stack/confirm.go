package stack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Errors of Confirm, for callers that act on them (rig exits 2 on ErrCannotAsk: bad input).
var (
	// ErrCannotAsk means standard input is not a terminal and --yes was not given: an up that
	// costs money is never started by a script that did not say so.
	ErrCannotAsk = errors.New("standard input is not a terminal, so rig cannot ask: pass --yes to go ahead; nothing was created")
	// ErrDeclined means the person asked said no.
	ErrDeclined = errors.New("not confirmed; nothing was created")
)

// CanAsk reports whether in is a terminal a person can answer on.
func CanAsk(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Confirm asks question on out and reads a yes or no from in: nil on y or yes, ErrDeclined on
// anything else, ErrCannotAsk when in is not a terminal.
func Confirm(in io.Reader, out io.Writer, question string) error {
	if !CanAsk(in) {
		return ErrCannotAsk
	}
	fmt.Fprintf(out, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return ErrDeclined
}
