package inventory

import (
	"errors"
	"fmt"
	"regexp"
)

// Names that become file names, folder names or command arguments — node names, run ids,
// playbook and stack names — follow one grammar: a letter or digit, then letters, digits, '.',
// '_' or '-', at most MaxNameLen bytes in all. So no name is empty, ".", "..", holds a '/' or
// starts with '-' (which a command would take for an option), and every name is one path
// element. docs/security.md lists where it is enforced.
const (
	NameGrammar = `[A-Za-z0-9][A-Za-z0-9._-]*`
	MaxNameLen  = 128
	// MaxStackNameLen is Pulumi's own limit on a stack name (ParseStackName in
	// github.com/pulumi/pulumi/sdk/v3/go/common/tokens/stack_name.go); its alphabet is the
	// grammar's, which only adds that the first character is a letter or digit.
	MaxStackNameLen = 100
)

var nameRe = regexp.MustCompile(`^` + NameGrammar + `$`)

// ErrBadName classifies a name outside the grammar.
var ErrBadName = errors.New("name outside the grammar")

// CheckName returns an error naming what (e.g. "nodes[2].name") when name is outside the grammar.
func CheckName(what, name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %s is %d bytes long, at most %d", ErrBadName, what, len(name), MaxNameLen)
	}
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%w: %s %q: want a letter or digit, then letters, digits, '.', '_' or '-' (no '/', no leading '.' or '-')", ErrBadName, what, name)
	}
	return nil
}

// CheckStackName checks a Pulumi stack name, given as what (a flag or field, e.g. "--stack"):
// it becomes the file name Pulumi.<stack>.yaml, a `pulumi --stack` argument, tags and resource
// names, so it follows the one grammar, within Pulumi's 100 bytes.
func CheckStackName(what, name string) error {
	if len(name) > MaxStackNameLen {
		return fmt.Errorf("%w: %s is %d bytes long, at most %d (Pulumi's limit for a stack name)", ErrBadName, what, len(name), MaxStackNameLen)
	}
	return CheckName(what, name)
}

// ServerName and ClientName are the names of a cluster's i-th server and client (from 0), as
// every target lays them out and playbooks refer to them.
func ServerName(i int) string { return fmt.Sprintf("node-%d", i) }
func ClientName(i int) string { return fmt.Sprintf("client-%d", i) }
