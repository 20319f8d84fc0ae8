package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/target/targettest"
)

// toyKind is an action kind that lives in this file alone: one type and one registration.
type toyKind struct{ Answer int }

func (*toyKind) Kind() string { return "toy" }
func (*toyKind) Fields() []actions.Field {
	return []actions.Field{{Key: "answer",
		Set: func(s actions.Spec, raw string) error {
			n, err := strconv.Atoi(raw)
			if err == nil && n < 0 {
				err = strconv.ErrRange
			}
			s.(*toyKind).Answer = n
			return err
		},
		Get: func(s actions.Spec) string { return strconv.Itoa(s.(*toyKind).Answer) }}}
}
func (*toyKind) Check(actions.Context) []actions.Problem { return nil }
func (t *toyKind) Describe(actions.Varied) string        { return "toy " + strconv.Itoa(t.Answer) }
func (t *toyKind) String() string                        { return "toy " + strconv.Itoa(t.Answer) }
func (t *toyKind) Run(ctx context.Context, env actions.Env) error {
	return actions.RecordAction(env, env.Leader(), "toy", struct {
		Answer int `json:"answer"`
	}{t.Answer})
}

var registerToy sync.Once

// A kind added as one file and one registration goes through validation (its keys checked, a
// bad value refused where it is), the run on the fake cluster, events.jsonl with its own
// payload, and the run's summary and report.
func TestToyKindEndToEnd(t *testing.T) {
	registerToy.Do(func() { actions.Register(func() actions.Spec { return &toyKind{} }) })

	if _, err := playbooks.Parse("bad.yaml", []byte(strings.Replace(basePlaybook, "%s", "2s", 1)+"timeline:\n  - {at: 500ms, toy: {answer: -1}}\n"), testDrivers); err == nil || !strings.Contains(err.Error(), "answer") {
		t.Errorf("a bad toy value: %v; want a problem at answer", err)
	}
	res := runFake(t, context.Background(), &targettest.Target{Cluster: targettest.NewCluster()}, plan(t, "2s", "timeline:\n  - {at: 500ms, toy: {answer: 42}}\n"))
	if res.err != nil {
		t.Fatal(res.err)
	}
	var payload []string
	for _, e := range res.events {
		if e.Action != nil && e.Action.Name == "toy" {
			payload = append(payload, e.Node+" "+string(e.Action.Payload))
		}
	}
	if len(payload) != 1 || !strings.HasSuffix(payload[0], ` {"answer":42}`) || strings.HasPrefix(payload[0], " ") {
		t.Errorf("toy events %q; want one, on the leader, with its payload", payload)
	}
	dir := res.outs[0].Dir
	var sum analysis.Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	found := false
	for _, a := range sum.Actions {
		found = found || a.Action == "toy"
	}
	if err != nil || !found {
		t.Errorf("summary.json actions %v (%v); want the toy", sum.Actions, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.md")); err != nil {
		t.Errorf("no report: %v", err)
	}
}
