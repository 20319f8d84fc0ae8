package conformance

import (
	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/engine/driver/reference"
)

// testDrivers are the drivers rig offers, handed to every playbook a test reads.
var testDrivers = driver.NewRegistry(reference.Driver{}, command.Driver{})
