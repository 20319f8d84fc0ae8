package main

import (
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/rig-dev/rig/inventory"
)

// Per-user stack names, as roachprod names clusters after their owner: on a shared backend
// (--backend s3://...) two people's "dev" would be one stack. Without --stack the cloud verbs act
// on the stack named after the login name ($USER), and "@NAME" is short for "$USER-NAME"; any
// other name is taken as given. The owner is the login name, not rig:owner, because the config
// that holds rig:owner is found by the stack name being resolved.

// stackFlagUsage is the --stack help of the verbs whose stack defaults to the user's own.
const stackFlagUsage = "stack name, config in Pulumi.NAME.yaml (default: your login name, $USER; @NAME means $USER-NAME)"

// loginName is $USER, else the account's name, made fit for a stack name: every character
// outside letters, digits, '.', '_' and '-' becomes '-'.
func loginName() (string, error) {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, name)
	name = strings.TrimLeft(name, ".-")
	if name == "" {
		return "", fmt.Errorf("%w: --stack: cannot tell your login name (USER is empty): give --stack NAME", errUsage)
	}
	return name, nil
}

// expandStack turns "@NAME" into "$USER-NAME"; other names, "" too, are returned as given.
func expandStack(name string) (string, error) {
	rest, ok := strings.CutPrefix(name, "@")
	if !ok {
		return name, nil
	}
	owner, err := loginName()
	if err != nil {
		return "", err
	}
	if rest == "" {
		return owner, nil
	}
	return owner + "-" + rest, nil
}

// needStack resolves *name in place ("" is the user's own stack, "@NAME" theirs too) and checks
// it against the stack name grammar before it becomes a file name or a pulumi argument.
func needStack(name *string) error {
	n, err := expandStack(*name)
	if err != nil {
		return err
	}
	if n == "" {
		if n, err = loginName(); err != nil {
			return err
		}
	}
	if err := inventory.CheckStackName("--stack", n); err != nil {
		return fmt.Errorf("%w: %w; nothing was created", errUsage, err)
	}
	*name = n
	return nil
}
