package automation

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// While the program is being built (no resource yet), progress says so every interval; after the
// first resource it stops saying it.
func TestProgressWhileBuilding(t *testing.T) {
	var out syncBuffer
	p := newProgress(&out, time.Now, 20*time.Millisecond)
	go p.run(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "still building the program") {
		if time.Now().After(deadline) {
			t.Fatalf("no building line: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.events <- events.EngineEvent{EngineEvent: apitype.EngineEvent{ResourcePreEvent: &apitype.ResourcePreEvent{
		Metadata: apitype.StepEventMetadata{Op: "create", URN: "urn:pulumi:dev::rig::aws:ec2/vpc:Vpc::rig-vpc", Type: "aws:ec2/vpc:Vpc"}}}}
	time.Sleep(100 * time.Millisecond)
	close(p.events)
	p.wait()
	text := out.String()
	after := text[strings.Index(text, "program running after"):]
	if strings.Contains(after, "still building") || !strings.Contains(after, "creating aws:ec2/vpc:Vpc rig-vpc") {
		t.Fatalf("progress:\n%s", text)
	}
}
