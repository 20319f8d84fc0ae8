package rundir

import (
	"path/filepath"
	"testing"
)

func TestInsideRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), InsideFile)
	for i, batch := range [][]InsideSpan{
		{{AtNs: 1, DurNs: 4e6, Kind: InsideForce, Source: "jfr", Thread: "archive-recorder", File: "0-0.rec", Role: RoleArchiveSegment}},
		{{AtNs: 2, DurNs: 9e6, Kind: InsideGCPause, Source: "jfr", Detail: "G1 Young"}},
	} {
		w, err := CreateInside(p) // the second open appends
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range batch {
			w.Write(s)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	got, err := ReadInside(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Role != RoleArchiveSegment || got[1].Kind != InsideGCPause || got[1].DurNs != 9e6 {
		t.Fatalf("read back %+v", got)
	}
}
