package bench

import (
	"encoding/json"
	"fmt"
	"github.com/rig-dev/rig/internal/units"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteJSON prints the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteJSON prints the report as one indented JSON document.
func (r DiskReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteTable prints the report as a scaling table: one row per (orders, threads), with the
// speed-up of each parallel take over the linear one of the same size when both ran.
func (r Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "engine alone: %d CPUs, %s, highest 1-min load average %.2f\n", r.CPUs, r.GoVersion, r.LoadAvg)
	if r.LoadAvg > float64(r.CPUs) {
		fmt.Fprintf(w, "WARNING: load average %.2f exceeds %d CPUs: treat every time below as an upper bound\n", r.LoadAvg, r.CPUs)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Orders\tThreads\tTake p50 ms\t[min-max]\tTake ns/order\tvs linear\tRestore ns/order\tHeap B/order\tWire B/order\tAllocs/take\tTakes\t")
	linear := map[int]float64{}
	for _, x := range r.Results {
		if x.Threads == 1 {
			linear[x.Orders] = x.TakeMsP50
		}
	}
	for _, x := range r.Results {
		speed := "-"
		if l, ok := linear[x.Orders]; ok && x.Threads > 1 && x.TakeMsP50 > 0 {
			speed = fmt.Sprintf("%.2fx", l/x.TakeMsP50)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t[%.2f-%.2f]\t%.1f\t%s\t%.1f\t%.1f\t%.1f\t%.0f\t%d\t\n",
			FormatCount(x.Orders), x.Threads, x.TakeMsP50, x.TakeMsMin, x.TakeMsMax, x.TakeNsPerOrder, speed,
			x.RestoreNsPerOrder, x.HeapBytesPerOrder, x.WireBytesPerOrder, x.AllocsPerTake, x.Takes)
	}
	return tw.Flush()
}

// FormatCount prints 100000 as 100K and 5000000 as 5M when exact.
func FormatCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1_000 && n%1_000 == 0:
		return strconv.Itoa(n/1_000) + "K"
	}
	return strconv.Itoa(n)
}

// ParseCounts reads a comma-separated list of counts: 100k,1m,5M,250000 (k = thousand, m or
// M = million, g or G = billion; underscores allowed). Every count must be 1 to max.
func ParseCounts(s string, max int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("%q has an empty item; want e.g. 100k,1m,5m", s)
		}
		v, err := units.ParseCount(f)
		if err != nil {
			return nil, err
		}
		n := int(v)
		if n < 1 || n > max {
			return nil, fmt.Errorf("%q is out of range; want 1 to %s", f, FormatCount(max))
		}
		out = append(out, n)
	}
	return out, nil
}
