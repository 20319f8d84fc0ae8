package plancheck

// The drivers a binary offers register themselves; the tests offer the rig's two.
import _ "github.com/rig-dev/rig/engine/driver/reference"
