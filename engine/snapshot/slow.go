package snapshot

import (
	"sync"
	"time"
)

// blockDelay makes a deliberately slow engine build, for the results index's change-point check
// (docs/results.md): built with
//
//	go build -ldflags "-X github.com/rig-dev/rig/engine/snapshot.blockDelay=60ms" ./cmd/rig
//
// every snapshot block takes that much longer to write. Empty (every normal build): no delay.
var blockDelay string

var slowBlock = sync.OnceValue(func() time.Duration {
	d, err := time.ParseDuration(blockDelay)
	if err != nil || d < 0 {
		return 0
	}
	return d
})
