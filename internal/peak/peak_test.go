package peak

import (
	"testing"
	"time"
)

func TestPerMs(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		marks []Mark
		want  int
	}{
		{nil, 0},
		{[]Mark{{0, 64}}, 64},
		{[]Mark{{0, 64}, {ms - 1, 64}, {ms, 64}}, 128},              // [0, 1ms) holds two
		{[]Mark{{0, 10}, {ms / 2, 64}, {ms, 64}, {2 * ms, 1}}, 128}, // [0.5ms, 1.5ms)
		{[]Mark{{0, 5}, {3 * ms, 5}, {6 * ms, 5}}, 5},
	} {
		if got := PerMs(tc.marks); got != tc.want {
			t.Errorf("PerMs(%v) = %d, want %d", tc.marks, got, tc.want)
		}
	}
}
