package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
)

// The admin API answers only the agent's secret: no header, another secret or another scheme
// gets 401 and changes nothing; the secret gets the status.
func TestAdminRequiresTheAgentsSecret(t *testing.T) {
	cfg := startEngine(t, 0)
	for name, auth := range map[string]string{
		"none":          "",
		"wrong secret":  "Bearer not-the-secret",
		"basic":         "Basic " + testAdminToken,
		"secret prefix": "Bearer " + testAdminToken[:4],
	} {
		for _, m := range []string{"GET /status", "POST /step-down", "POST /snapshot", "GET /metrics"} {
			method, path, _ := strings.Cut(m, " ")
			req, _ := http.NewRequest(method, "http://"+cfg.AdminAddr+path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with auth %s: %s, want 401", m, name, resp.Status)
			}
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+cfg.AdminAddr+"/status", nil)
	engine.AuthorizeAdmin(req, testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status with the secret: %s", resp.Status)
	}
}
