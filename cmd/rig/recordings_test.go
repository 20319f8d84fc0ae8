package main

import (
	"slices"
	"testing"

	"github.com/rig-dev/rig/recording"
)

// The agent rig runs reads every format an engine may record in: no format registers itself,
// so one left out of offeredRecordings would leave its spans unread.
func TestRigReadsEveryRecordingFormat(t *testing.T) {
	want := []recording.Format{recording.FormatGoTrace, recording.FormatJFR}
	if got := offeredRecordings().Formats(); !slices.Equal(got, want) {
		t.Errorf("offered %v; want %v", got, want)
	}
}
