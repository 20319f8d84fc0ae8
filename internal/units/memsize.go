package units

import (
	"fmt"
	"strconv"
)

// FormatMemory writes a byte count in KiB, MiB, GiB or TiB with one decimal, past that in TiB
// with thousands grouped: a size read by a person (memory needed and available, free space),
// where FormatSize writes one a playbook would hold.
func FormatMemory(b float64) string {
	switch {
	case b >= 1<<40:
		return Group(strconv.FormatFloat(b/(1<<40), 'f', 1, 64)) + " TiB"
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", b/(1<<10))
}
