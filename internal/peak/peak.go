// Package peak counts the most events in any 1 ms window: the burst figure that the sender
// (loadgen) and the receiver (the reference engine's UDP ingress) both report.
package peak

import "time"

// Mark is N events at At (Unix ns).
type Mark struct {
	At int64
	N  int
}

// PerMs is the most events in any window [t, t+1ms) over time-ordered marks.
func PerMs(marks []Mark) int {
	peak, sum, j := 0, 0, 0
	for i := range marks {
		sum += marks[i].N
		for marks[i].At-marks[j].At >= int64(time.Millisecond) {
			sum -= marks[j].N
			j++
		}
		peak = max(peak, sum)
	}
	return peak
}
