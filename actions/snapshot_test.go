package actions

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// snapEnv answers POST /snapshot with body and keeps the progress lines.
type snapEnv struct {
	coreEnv
	body     string
	progress []string
}

func (e *snapEnv) Admin(context.Context, string, string) ([]byte, error) { return []byte(e.body), nil }
func (e *snapEnv) Progress(format string, args ...any) {
	e.progress = append(e.progress, fmt.Sprintf(format, args...))
}

// The snapshot line prints a figure the engine leaves out as not supported, never as a zero.
func TestSnapshotLineNamesUncounted(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"index":1216,"take_ms":2.5,"bytes":4096}`, "(orders n/a (not supported by the engine), 4096 bytes, syncs n/a (not supported by the engine))"},
		{`{"index":1216,"take_ms":2.5,"bytes":4096,"orders":0,"syncs":3}`, "(orders 0, 4096 bytes, syncs 3)"},
	} {
		env := &snapEnv{body: c.body}
		if err := (&Snapshot{}).Run(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		if len(env.progress) != 1 || !strings.Contains(env.progress[0], c.want) {
			t.Errorf("answer %s: progress %q, want %q", c.body, env.progress, c.want)
		}
	}
}
