package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// TEMPORARY: stands in for validateStackConfig until cmd/rig/infra.go defines it. Delete this
// file when infra.go lands (the two definitions cannot coexist).
func validateStackConfig(cmd *cobra.Command, path string) error {
	return fmt.Errorf("checking a stack config is not built yet (cmd/rig/infra.go)")
}
