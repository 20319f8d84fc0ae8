package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds
	Output  string
}

// Result is one top-level test's or one package's end.
type Result struct {
	Package string
	Test    string // empty for a package
	Action  string // pass, fail or skip
	Elapsed time.Duration
}

// Record gathers the results of one or more `go test -json` streams.
type Record struct {
	Tests    []Result
	Packages []Result
	failed   bool
	held     map[string][]string  // a running top-level test's output, by package and test
	started  map[string]time.Time // a running top-level test's start, by package and test
}

// Read takes the events from r. To w it writes what plain go test prints: the packages' own
// lines (ok, FAIL, no test files), build errors, and a failed test's output (a passing test's
// output is dropped, as go test does without -v). A line that is not an event is copied as is.
func (rec *Record) Read(r io.Reader, w io.Writer) error {
	if rec.held == nil {
		rec.held, rec.started = map[string][]string{}, map[string]time.Time{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		rec.take(e, w)
	}
	return sc.Err()
}

func (rec *Record) take(e event, w io.Writer) {
	top, _, _ := strings.Cut(e.Test, "/")
	key := e.Package + "\x00" + top
	switch {
	case e.Action == "build-output":
		io.WriteString(w, e.Output)
	case e.Action == "build-fail":
		rec.failed = true
	case e.Action == "output" && e.Test == "":
		if e.Output != "PASS\n" {
			io.WriteString(w, e.Output)
		}
	case e.Action == "output":
		rec.held[key] = append(rec.held[key], e.Output)
	case e.Action == "run" && e.Test == top:
		rec.started[key] = e.Time
	case !ended(e.Action):
	case e.Test == "":
		rec.Packages = append(rec.Packages, Result{Package: e.Package, Action: e.Action, Elapsed: seconds(e.Elapsed)})
		if e.Action == "fail" {
			rec.failed = true
			// A test that never ended (a panic, a timeout) failed with its package, at its end.
			for k, out := range rec.held {
				if strings.HasPrefix(k, e.Package+"\x00") {
					io.WriteString(w, strings.Join(out, ""))
					delete(rec.held, k)
				}
			}
			for k, at := range rec.started {
				if pkg, test, _ := strings.Cut(k, "\x00"); pkg == e.Package {
					rec.Tests = append(rec.Tests, Result{Package: pkg, Test: test, Action: "fail", Elapsed: e.Time.Sub(at)})
				}
			}
		}
		for k := range rec.started {
			if strings.HasPrefix(k, e.Package+"\x00") {
				delete(rec.started, k)
			}
		}
	case e.Test == top:
		rec.Tests = append(rec.Tests, Result{Package: e.Package, Test: e.Test, Action: e.Action, Elapsed: seconds(e.Elapsed)})
		if e.Action == "fail" {
			rec.failed = true
			io.WriteString(w, strings.Join(rec.held[key], ""))
		}
		delete(rec.held, key)
		delete(rec.started, key)
	}
}

func ended(action string) bool { return action == "pass" || action == "fail" || action == "skip" }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Failed says whether a build, a package or a test failed.
func (rec *Record) Failed() bool { return rec.failed }

// Slowest is the n slowest top-level tests, slowest first.
func (rec *Record) Slowest(n int) []Result {
	s := append([]Result(nil), rec.Tests...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Elapsed > s[j].Elapsed })
	return s[:min(n, len(s))]
}

// Over is the top-level tests that took longer than budget, slowest first; none when budget is 0.
func (rec *Record) Over(budget time.Duration) []Result {
	if budget <= 0 {
		return nil
	}
	var over []Result
	for _, r := range rec.Slowest(len(rec.Tests)) {
		if r.Elapsed > budget {
			over = append(over, r)
		}
	}
	return over
}

// PrintSlowest lists the n slowest tests with their package and result.
func (rec *Record) PrintSlowest(w io.Writer, n int) {
	trim := rec.commonPrefix()
	skipped := 0
	for _, r := range rec.Tests {
		if r.Action == "skip" {
			skipped++
		}
	}
	fmt.Fprintf(w, "testtime: the %d slowest of %d tests (%d skipped):\n", min(n, len(rec.Tests)), len(rec.Tests), skipped)
	for _, r := range rec.Slowest(n) {
		fmt.Fprintf(w, "%8.1f s  %-4s  %s %s\n", r.Elapsed.Seconds(), r.Action, strings.TrimPrefix(r.Package, trim), r.Test)
	}
}

// PrintPackages lists every package's time, longest first, and their sum.
func (rec *Record) PrintPackages(w io.Writer) {
	trim := rec.commonPrefix()
	s := append([]Result(nil), rec.Packages...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Elapsed > s[j].Elapsed })
	var sum time.Duration
	for _, r := range s {
		sum += r.Elapsed
	}
	fmt.Fprintf(w, "testtime: %d packages, %.1f s of package time:\n", len(s), sum.Seconds())
	for _, r := range s {
		if r.Action == "skip" { // no test files
			continue
		}
		fmt.Fprintf(w, "%8.1f s  %-4s  %s\n", r.Elapsed.Seconds(), r.Action, strings.TrimPrefix(r.Package, trim))
	}
}

// commonPrefix is the folder all packages share (the module path), so lists print it once.
func (rec *Record) commonPrefix() string {
	if len(rec.Packages) < 2 {
		return ""
	}
	p := rec.Packages[0].Package + "/"
	for _, r := range rec.Packages[1:] {
		for !strings.HasPrefix(r.Package+"/", p) {
			i := strings.LastIndex(strings.TrimSuffix(p, "/"), "/")
			if i < 0 {
				return ""
			}
			p = p[:i+1]
		}
	}
	return p
}
