package recording

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rig-dev/rig/rundir"
)

// formats are the readers the package's tests read with, as cmd/rig offers them.
var formats = NewRegistry(JFR{}, GoTrace{})

type fakeReader Format

func (f fakeReader) Format() Format { return Format(f) }
func (fakeReader) Read(context.Context, string, Options) ([]rundir.InsideSpan, error) {
	return []rundir.InsideSpan{{Kind: "force"}}, nil
}

// A registry reads exactly the formats it was built with, and says which when asked for another.
func TestRegistryOffersWhatItWasGiven(t *testing.T) {
	r := NewRegistry(fakeReader("b"), fakeReader("a"))
	if got := r.Formats(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("Formats() = %v", got)
	}
	if spans, err := r.Read(context.Background(), "a", "x", Options{}); err != nil || len(spans) != 1 {
		t.Fatalf("Read(a) = %v, %v", spans, err)
	}
	_, err := r.Read(context.Background(), "c", "x.bin", Options{})
	if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), `x.bin: "c": no reader for this recording format; want a or b`) {
		t.Errorf("Read(c): %v", err)
	}
	if _, err := (*Registry)(nil).Lookup(FormatJFR); !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "none is offered") {
		t.Errorf("a nil registry: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("two readers of one format did not panic")
		}
	}()
	NewRegistry(fakeReader("a"), fakeReader("a"))
}
