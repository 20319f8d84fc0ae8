package analysis

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The report shows the engine's settings as the run found them in effect, typed by the table
// the manifest keeps: not the value asked, and not re-derived from the playbook, whose driver
// this binary need not offer. A setting in effect with another value than asked is flagged.
func TestReportShowsSettingsInEffect(t *testing.T) {
	dir := copyTree(t, filepath.Join("testdata", "golden-run"))
	path := filepath.Join(dir, "manifest.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	pb := m["playbook"].(map[string]any)
	pb["engine"] = map[string]any{"driver": "not-offered-here", "values": map[string]any{"sync_level": 7}}
	m["engine_settings"] = map[string]any{
		"driver": "not-offered-here",
		"table": []any{
			map[string]any{"name": "sync_level", "kind": "integer"},
			map[string]any{"name": "heartbeat_timeout", "kind": "duration", "render": "nanos"},
		},
		"asked": map[string]any{"sync_level": "2", "heartbeat_timeout": "500ms"},
	}
	for _, cfg := range m["engine_config"].(map[string]any) {
		cfg.(map[string]any)["sync_level"] = 0
		cfg.(map[string]any)["heartbeat_timeout"] = 500_000_000
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Settings; st.SyncLevel == nil || *st.SyncLevel != 0 {
		t.Errorf("sync level %v, want 0 (in effect)", st.SyncLevel)
	}
	if err := WriteOutputs(dir, s); err != nil {
		t.Fatal(err)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(rep[strings.Index(string(rep), "**Run settings:**"):]), "\n")
	if !strings.Contains(line, "sync level 0 ·") || !strings.Contains(line, "**not as asked: sync_level 0 in effect, 2 asked**") {
		t.Errorf("settings line: %s", line)
	}
	if strings.Contains(line, "heartbeat") {
		t.Errorf("a setting in effect as asked flagged: %s", line)
	}
}
