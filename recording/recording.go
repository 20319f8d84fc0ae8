// Package recording reads an engine's own recording of where its time went (Java Flight
// Recorder on a JVM engine, the runtime/trace flight recorder on a Go engine) into
// rundir.InsideSpan lines, the one format the analysis reads. Each format's reader lives in its
// own file; the binary that reads recordings builds the Registry of the formats it offers and
// hands it to the agent, so the agent handles every format alike and no format registers itself.
package recording

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/rig-dev/rig/rundir"
)

// Format names a kind of recording.
type Format string

const (
	FormatJFR     Format = "jfr"      // a Java Flight Recorder file (or a repository's chunks)
	FormatGoTrace Format = "go_trace" // a Go execution trace (runtime/trace, FlightRecorder.WriteTo)
)

// Ext is a recording's file extension in <node>/recordings/.
func (f Format) Ext() string {
	switch f {
	case FormatJFR:
		return ".jfr"
	case FormatGoTrace:
		return ".trace"
	}
	return ".bin"
}

// Options says how to read a recording.
type Options struct {
	// DataDir is the engine's data folder where the recording was made: file paths inside it
	// are written relative to it, and give a force or a write its role.
	DataDir string
	Logger  *slog.Logger
}

// Reader reads one format's recording files into spans.
type Reader interface {
	Format() Format
	Read(ctx context.Context, path string, opt Options) ([]rundir.InsideSpan, error)
}

// ErrUnknownFormat: no reader is offered for the format.
var ErrUnknownFormat = errors.New("no reader for this recording format")

// Registry is the recording formats a binary reads, by format. It is built once, where the
// binary starts, and handed down to the agent that reads its engine's recordings.
type Registry struct {
	byFormat map[Format]Reader
}

// NewRegistry offers rs; two readers of one format are a programming error and panic.
func NewRegistry(rs ...Reader) *Registry {
	r := &Registry{byFormat: map[Format]Reader{}}
	for _, rd := range rs {
		if _, dup := r.byFormat[rd.Format()]; dup {
			panic("recording: two readers for " + string(rd.Format()))
		}
		r.byFormat[rd.Format()] = rd
	}
	return r
}

// Lookup finds the reader of format f; an error wraps ErrUnknownFormat and names those offered.
func (r *Registry) Lookup(f Format) (Reader, error) {
	if r != nil {
		if rd, ok := r.byFormat[f]; ok {
			return rd, nil
		}
	}
	names := make([]string, 0, len(r.Formats()))
	for _, f := range r.Formats() {
		names = append(names, string(f))
	}
	want := strings.Join(names, " or ")
	if want == "" {
		want = "none is offered"
	} else {
		want = "want " + want
	}
	return nil, fmt.Errorf("%q: %w; %s", f, ErrUnknownFormat, want)
}

// Formats lists the formats offered, sorted.
func (r *Registry) Formats() []Format {
	if r == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(r.byFormat))
}

// Read reads the recording at path, of format f.
func (r *Registry) Read(ctx context.Context, f Format, path string, opt Options) ([]rundir.InsideSpan, error) {
	rd, err := r.Lookup(f)
	if err != nil {
		return nil, fmt.Errorf("read recording %s: %w", path, err)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	spans, err := rd.Read(ctx, path, opt)
	if err != nil {
		return nil, fmt.Errorf("read %s recording %s: %w", f, path, err)
	}
	return spans, nil
}
