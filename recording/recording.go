// Package recording reads an engine's own recording of where its time went (Java Flight
// Recorder on a JVM engine, the runtime/trace flight recorder on a Go engine) into
// rundir.InsideSpan lines, the one format the analysis reads. Each format's reader lives in its
// own file and registers itself here, so the agent and the runner that collect recordings
// handle every format alike.
package recording

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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

// Reader turns one recording file into spans.
type Reader func(ctx context.Context, path string, opt Options) ([]rundir.InsideSpan, error)

// ErrUnknownFormat: no reader is registered for the format.
var ErrUnknownFormat = errors.New("no reader for this recording format")

var readers = map[Format]Reader{}

// register is called from each format's file (init), once per format.
func register(f Format, r Reader) {
	if _, dup := readers[f]; dup {
		panic("recording: two readers for " + string(f))
	}
	readers[f] = r
}

// Read reads the recording at path.
func Read(ctx context.Context, f Format, path string, opt Options) ([]rundir.InsideSpan, error) {
	r, ok := readers[f]
	if !ok {
		return nil, fmt.Errorf("read recording %s: %q: %w", path, f, ErrUnknownFormat)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	spans, err := r(ctx, path, opt)
	if err != nil {
		return nil, fmt.Errorf("read %s recording %s: %w", f, path, err)
	}
	return spans, nil
}
