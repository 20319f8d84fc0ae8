package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// writeJSON writes v as indented JSON, the --json output of every command that has one; a
// failed write (a closed pipe) is the command's error, not dropped.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON output: %w", err)
	}
	return nil
}
