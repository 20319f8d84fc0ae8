package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// events is a `go test -json` stream: a passing package whose slow test passed, a failing
// package with a failed subtest and a test that never ended (a panic), a build failure.
const events = `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestSlow"}
{"Action":"output","Package":"m/a","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"m/a","Test":"TestSlow","Output":"    a_test.go:9: quiet when it passes\n"}
{"Action":"output","Package":"m/a","Test":"TestSlow","Output":"--- PASS: TestSlow (61.50s)\n"}
{"Action":"pass","Package":"m/a","Test":"TestSlow","Elapsed":61.5}
{"Action":"run","Package":"m/a","Test":"TestSkipped"}
{"Action":"skip","Package":"m/a","Test":"TestSkipped","Elapsed":0}
{"Action":"output","Package":"m/a","Output":"PASS\n"}
{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t61.6s\n"}
{"Action":"pass","Package":"m/a","Elapsed":61.6}
{"Action":"run","Package":"m/b","Test":"TestParent"}
{"Action":"run","Package":"m/b","Test":"TestParent/sub"}
{"Action":"output","Package":"m/b","Test":"TestParent/sub","Output":"    b_test.go:12: the sub's failure\n"}
{"Action":"output","Package":"m/b","Test":"TestParent/sub","Output":"    --- FAIL: TestParent/sub (0.10s)\n"}
{"Action":"fail","Package":"m/b","Test":"TestParent/sub","Elapsed":0.1}
{"Action":"output","Package":"m/b","Test":"TestParent","Output":"--- FAIL: TestParent (0.20s)\n"}
{"Action":"fail","Package":"m/b","Test":"TestParent","Elapsed":0.2}
{"Time":"2026-01-02T10:00:00Z","Action":"run","Package":"m/b","Test":"TestPanics"}
{"Action":"output","Package":"m/b","Test":"TestPanics","Output":"panic: boom\n"}
{"Action":"output","Package":"m/b","Output":"FAIL\tm/b\t0.3s\n"}
{"Time":"2026-01-02T10:01:05Z","Action":"fail","Package":"m/b","Elapsed":0.3}
{"ImportPath":"m/c [m/c.test]","Action":"build-output","Output":"c.go:3:1: syntax error\n"}
{"ImportPath":"m/c [m/c.test]","Action":"build-fail"}
not json: copied as is
`

func TestFollowPrintsPlainOutputAndKeepsTheEvents(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "tests.json")
	var out, errOut bytes.Buffer
	if code := run([]string{"-json", keep}, strings.NewReader(events), &out, &errOut); code != 1 {
		t.Errorf("exit %d, want 1 (tests failed); stderr %s", code, errOut.String())
	}
	want := "ok  \tm/a\t61.6s\n" +
		"    b_test.go:12: the sub's failure\n    --- FAIL: TestParent/sub (0.10s)\n--- FAIL: TestParent (0.20s)\n" +
		"FAIL\tm/b\t0.3s\n" +
		"panic: boom\n" +
		"c.go:3:1: syntax error\n" +
		"not json: copied as is\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	kept, err := os.ReadFile(keep)
	if err != nil || string(kept) != events {
		t.Errorf("kept %q (%v), want the events as read", kept, err)
	}
}

func TestFollowPassing(t *testing.T) {
	pass := strings.SplitAfter(events, `{"Action":"pass","Package":"m/a","Elapsed":61.6}`+"\n")[0]
	var out bytes.Buffer
	if code := run([]string{"-json", filepath.Join(t.TempDir(), "j")}, strings.NewReader(pass), &out, &out); code != 0 {
		t.Errorf("exit %d for a passing stream:\n%s", code, out.String())
	}
}

func TestSummaryFailsTheTestOverBudget(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	os.WriteFile(a, []byte(events), 0o644)
	os.WriteFile(b, []byte(`{"Action":"pass","Package":"m/d","Test":"TestMid","Elapsed":30}`+"\n"+`{"Action":"pass","Package":"m/d","Elapsed":30.1}`+"\n"), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"-budget", "1m", "-top", "2", a, b}, nil, &out, &errOut); code != 1 {
		t.Errorf("exit %d, want 1: TestSlow took 61.5 s of a 1m budget; stderr %s", code, errOut.String())
	}
	for _, want := range []string{
		"the 2 slowest of 5 tests (1 skipped):\n    65.0 s  fail  b TestPanics\n    61.5 s  pass  a TestSlow\n",
		"   61.6 s  pass  a\n", "    0.3 s  fail  b\n",
		"testtime: m/b TestPanics took 65.0 s, over the budget of 1m0s per test\ntesttime: m/a TestSlow took 61.5 s, over the budget of 1m0s per test\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"-budget", "66s", a, b}, nil, &out, &errOut); code != 0 {
		t.Errorf("exit %d with every test within 66s:\n%s", code, out.String())
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{{}, {"-budget", "-1s", "x"}, {"-budget", "10"}, {"-json", "f", "extra"}, {"/no/such/record.json"}} {
		var out, errOut bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errOut.String())
		}
	}
}

func TestOverWithoutBudget(t *testing.T) {
	rec := Record{Tests: []Result{{Test: "TestX", Elapsed: time.Hour}}}
	if got := rec.Over(0); got != nil {
		t.Errorf("Over(0) = %v, want none: 0 is no budget", got)
	}
}
