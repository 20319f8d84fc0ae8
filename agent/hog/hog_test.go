package hog

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The hog spins until its deadline and says it is ready once every thread is set up.
func TestSpinEndsAtItsDeadline(t *testing.T) {
	var out, errw bytes.Buffer
	t0 := time.Now()
	if code := Main([]string{"--threads", "2", "--for", "200ms", "--nice", "5"}, &out, &errw); code != 0 {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
	if took := time.Since(t0); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("spun %s; want its 200ms", took)
	}
	if out.String() != Ready+"\n" {
		t.Errorf("stdout %q; want %q", out.String(), Ready)
	}
}

// Bad settings exit 2 saying what would be valid, before anything spins.
func TestMainRefusesBadSettings(t *testing.T) {
	for args, want := range map[string]string{
		"--threads 0 --for 1s":                       "want 1 to 256",
		"--threads 300 --for 1s":                     "want 1 to 256",
		"--threads 1 --for 0s":                       "want a Go duration from 1ns to 24h",
		"--threads 1 --for 1000h":                    "want a Go duration from 1ns to 24h",
		"--threads 1 --for 2562047h47m16.854775807s": "want a Go duration from 1ns to 24h",
		"--threads 1 --for 1s --nice 20":             "want -20 to 19",
	} {
		var out, errw bytes.Buffer
		if code := Main(strings.Fields(args), &out, &errw); code != 2 || !strings.Contains(errw.String(), want) || out.Len() != 0 {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want 2 saying %q", args, code, errw.String(), out.String(), want)
		}
	}
}

// The agent takes what a playbook may ask for and nothing longer: a day, not 1000h, nor the
// largest Go duration (its kill deadline, for + the overrun, would overflow).
func TestCheckCapsForAtThePlaybooksMaximum(t *testing.T) {
	if _, err := (Request{Threads: 1, For: "24h"}).Check(); err != nil {
		t.Errorf("24h: %v; want it taken", err)
	}
	for _, d := range []string{"24h0m0.001s", "1000h", time.Duration(1<<63 - 1).String()} {
		if _, err := (Request{Threads: 1, For: d}).Check(); err == nil || !strings.Contains(err.Error(), "24h") {
			t.Errorf("for %s: %v; want a refusal naming 24h", d, err)
		}
	}
}
