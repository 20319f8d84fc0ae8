package rundir

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/rig-dev/rig/inventory"
)

// MaxRunIDLen bounds a run id: its archive's manifest name (<run-id>.manifest.json) must still
// be a file name (255 bytes). Real ids are under 100: a date, a playbook name of at most 64
// characters, a sweep's -rNN-aN.
const MaxRunIDLen = 200

// A run id is what the runner makes, YYYYMMDD-HHMMSS-<playbook>[-rNN][-aN][-N]: a playbook name
// (inventory.NameGrammar) with more of the same characters. Anything else (".", "..", a slash,
// a space, a control character) is no run id: a folder or archive named so is refused where it
// would become a path (rig archive, an archive read back, an import).
var runIDRe = regexp.MustCompile(`^` + inventory.NameGrammar + `$`)

// ErrRunID classifies a name that is not a run id.
var ErrRunID = errors.New("not a run id")

// CheckRunID says why id is not a run id, or nil.
func CheckRunID(id string) error {
	if len(id) > MaxRunIDLen || !runIDRe.MatchString(id) {
		return fmt.Errorf("%w: %q; want 1-%d of a-z A-Z 0-9 . _ - starting with a letter or digit, as YYYYMMDD-HHMMSS-<playbook>", ErrRunID, id, MaxRunIDLen)
	}
	return nil
}
