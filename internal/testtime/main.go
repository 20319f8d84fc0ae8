// Command testtime keeps a record of the test suite's time. Two uses:
//
//	go test -json ... | testtime -json FILE
//
// keeps the events in FILE and prints what plain `go test` would (each package's result line,
// a failed test's output, build errors); its exit status is go test's pass or fail.
//
//	testtime -budget 60s -top 20 FILE...
//
// prints the slowest tests of those records and each package's time, and exits non-zero when
// one top-level test took longer than the budget: a test that grows past its share fails CI by
// name instead of slowing every run unnoticed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keep := fs.String("json", "", "read `go test -json` on stdin, keep it in this file and print plain go test output")
	budget := fs.Duration("budget", 0, "fail when one top-level test took longer than this (0: no budget)")
	top := fs.Int("top", 20, "how many of the slowest tests to list")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *budget < 0 || *top < 0 {
		fmt.Fprintf(stderr, "testtime: -budget %v and -top %d must not be negative\n", *budget, *top)
		return 2
	}
	if *keep != "" {
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "testtime: -json reads stdin; unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		return follow(*keep, stdin, stdout, stderr)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "testtime: give -json FILE (events on stdin) or the record files to summarise")
		return 2
	}
	var rec Record
	for _, name := range fs.Args() {
		if err := readFile(&rec, name); err != nil {
			fmt.Fprintf(stderr, "testtime: %v\n", err)
			return 2
		}
	}
	rec.PrintSlowest(stdout, *top)
	rec.PrintPackages(stdout)
	code := 0
	for _, r := range rec.Over(*budget) {
		fmt.Fprintf(stdout, "testtime: %s %s took %.1f s, over the budget of %v per test\n", r.Package, r.Test, r.Elapsed.Seconds(), *budget)
		code = 1
	}
	return code
}

// follow tees stdin into the file named keep while echoing plain go test output.
func follow(keep string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, err := os.Create(keep)
	if err != nil {
		fmt.Fprintf(stderr, "testtime: %v\n", err)
		return 2
	}
	var rec Record
	rerr := rec.Read(io.TeeReader(stdin, f), stdout)
	if err := errors.Join(rerr, f.Close()); err != nil {
		fmt.Fprintf(stderr, "testtime: keeping go test -json in %s: %v\n", keep, err)
		return 2
	}
	if rec.Failed() {
		return 1
	}
	return 0
}

func readFile(rec *Record, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := rec.Read(f, io.Discard); err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	return nil
}
