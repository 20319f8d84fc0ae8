package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/infra/stack"
)

// envCmd prints the exports that make a plain pulumi (or aws) command act on what rig acts on:
// the same backend, secrets passphrase and AWS profile, chosen as rig chooses them.
func envCmd() *cobra.Command {
	var f infraFlags
	var name string
	c := &cobra.Command{
		Use:   "env --stack NAME",
		Short: "Print the shell exports that make plain pulumi commands act on the stack's state (eval \"$(rig env --stack NAME)\")",
		Long: `Print, as POSIX shell exports, the environment rig gives the pulumi CLI for the stack: the
backend (PULUMI_BACKEND_URL, as --backend or PULUMI_BACKEND_URL chose it, else rig's local
folder), the passphrase file of rig's local backend, and AWS_PROFILE when Pulumi.NAME.yaml names
aws:profile. Then 'pulumi stack select NAME' in the repository root reaches the same stack that
rig up, rig down and rig gc do. Nothing is created.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needStack(&name); err != nil {
				return err
			}
			extra := map[string]string{}
			if f.Backend != "" {
				extra["PULUMI_BACKEND_URL"] = f.Backend
			}
			b, err := stack.ChooseBackend("", extra)
			if err != nil {
				return err
			}
			exports := map[string]string{"PULUMI_BACKEND_URL": b.URL()}
			for _, k := range []string{"PULUMI_CONFIG_PASSPHRASE_FILE"} {
				if v := b.Env[k]; v != "" {
					exports[k] = v
				}
			}
			path := filepath.Join(f.ProjectDir, "Pulumi."+name+".yaml")
			secrets := ""
			if sc, err := spec.ReadStackConfig(path); err == nil {
				if sc.Profile != "" {
					exports["AWS_PROFILE"] = sc.Profile
				}
				secrets = sc.SecretsProvider
			} else if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "# stack %s: %s\n", name, b.Where(secrets))
			keys := make([]string, 0, len(exports))
			for k := range exports {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(out, "export %s=%s\n", k, shellQuote(exports[k]))
			}
			root, _ := filepath.Abs(f.ProjectDir)
			fmt.Fprintf(out, "# then, in %s: pulumi stack select %s\n", root, name)
			return nil
		},
	}
	c.Flags().StringVar(&name, "stack", "", stackFlagUsage)
	f.register(c)
	return c
}

// shellQuote quotes s for a POSIX shell: single quotes, each ' written as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
