package automation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"

	"github.com/rig-dev/rig/inventory"
)

// Resource types whose steps decide whether an update must detach volumes first.
const (
	typeAttachment = "aws:ec2/volumeAttachment:VolumeAttachment"
	typeInstance   = "aws:ec2/instance:Instance"
)

// ErrDetachNeedsUnmount means an update would detach data volumes that rig cannot unmount first.
var ErrDetachNeedsUnmount = errors.New("the update detaches data volumes, which must be unmounted first")

// Detachment is a volume attachment that an update would replace or remove, and why.
type Detachment struct {
	URN  string
	Name string // the resource's name: NODE-data or NODE-data-VOLUME (infra/cluster)
	Node string
	Why  string // e.g. "replace (deviceName)", "delete", "its instance is replaced"
}

// attachmentNode is the node of an attachment named NODE-data or NODE-data-VOLUME.
func attachmentNode(name string) string {
	node, _, _ := strings.Cut(name, "-data")
	return node
}

// Detachments previews an update of a standing stack and returns the volume attachments the
// update would replace or delete: a volume at a new device (rig:dataVolumes reordered), a volume
// taken off the list, a move between the volume* keys and rig:dataVolumes (other resource names),
// and every attachment of an instance the update replaces. In AWS each of them is a DetachVolume
// of a volume the node may have mounted, and its replacement an AttachVolume at a device or of a
// volume that must be free first. The attachments are delete-before-replace (infra/cluster), but
// a removed attachment is deleted only at the end of an update, after the new ones are created,
// so Up detaches all of them before the update instead (DetachFirst).
func Detachments(ctx context.Context, st auto.Stack) ([]Detachment, error) {
	ch := make(chan events.EngineEvent)
	var out []Detachment
	seen := map[string]bool{}
	at := map[string]int{}               // URN -> index in out
	attachments := map[string][]string{} // node -> attachment URNs the preview saw
	replaced := map[string]bool{}        // nodes whose instance is replaced
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range ch {
			pre := e.ResourcePreEvent
			if pre == nil {
				continue
			}
			m := pre.Metadata
			name := urnName(m.URN)
			switch m.Type {
			case typeAttachment:
				node := attachmentNode(name)
				attachments[node] = append(attachments[node], m.URN)
				why := ""
				switch m.Op {
				case apitype.OpReplace, apitype.OpCreateReplacement, apitype.OpDeleteReplaced:
					why = "replace"
					if len(m.Keys) > 0 {
						why += " (" + strings.Join(m.Keys, ", ") + ")"
					}
				case apitype.OpDelete:
					why = "delete"
				}
				if why == "" {
					continue
				}
				// A replacement is reported in up to three steps; the keys may come with any.
				if i, ok := at[m.URN]; ok {
					if !strings.Contains(out[i].Why, "(") && strings.Contains(why, "(") {
						out[i].Why = why
					}
					continue
				}
				seen[m.URN] = true
				at[m.URN] = len(out)
				out = append(out, Detachment{URN: m.URN, Name: name, Node: node, Why: why})
			case typeInstance:
				if m.Op == apitype.OpReplace || m.Op == apitype.OpCreateReplacement {
					replaced[name] = true
				}
			}
		}
	}()
	_, err := st.Preview(ctx, optpreview.EventStreams(ch))
	<-done
	if err != nil {
		return nil, fmt.Errorf("pulumi preview (to find the volume attachments the update replaces): %w", err)
	}
	for node := range replaced {
		for _, urn := range attachments[node] {
			if !seen[urn] {
				seen[urn] = true
				out = append(out, Detachment{URN: urn, Name: urnName(urn), Node: node, Why: "its instance is replaced"})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DetachFirst makes an update of a standing stack detach before it attaches: it previews the
// update (Detachments); when attachments would be replaced or removed, it has the agents of their
// nodes stop the engine and unmount the data volumes (q, as `rig down` does), and then destroys
// just those attachments (DetachVolume of unmounted volumes), so that the update only creates
// attachments, at devices and of volumes that are free. Without q it refuses and changes nothing.
// Up runs it before every update; out gets what it does.
func DetachFirst(ctx context.Context, st auto.Stack, name string, out io.Writer, q func(context.Context, *inventory.Inventory) error) error {
	outputs, err := st.Outputs(ctx)
	if err != nil {
		return fmt.Errorf("read outputs of %s: %w", name, err)
	}
	inv, err := decodeInventory(name, outputs)
	if err != nil {
		return nil // nothing deployed yet (or a failed first up): no node has a volume mounted
	}
	ds, err := Detachments(ctx, st)
	if err != nil || len(ds) == 0 {
		return err
	}
	var lines, urns, nodes []string
	for _, x := range ds {
		lines = append(lines, x.Name+": "+x.Why)
		urns = append(urns, x.URN)
		if !slices.Contains(nodes, x.Node) {
			nodes = append(nodes, x.Node)
		}
	}
	fmt.Fprintf(out, "rig: the update replaces or removes %d volume attachment(s) of %s (%s): detaching them first\n",
		len(ds), strings.Join(nodes, ", "), strings.Join(lines, "; "))
	if q == nil {
		return fmt.Errorf("%w: %s (%s): give rig up the SSH key (--ssh-key, and --sudo as for rig run) so that each node's agent "+
			"stops its engine and unmounts them, or rig down --stack %s and up again; nothing was changed",
			ErrDetachNeedsUnmount, strings.Join(nodes, ", "), strings.Join(lines, "; "), name)
	}
	sub := &inventory.Inventory{Target: inv.Target, Bucket: inv.Bucket, ExpiresAt: inv.ExpiresAt, Placement: inv.Placement}
	for _, n := range inv.Nodes {
		if slices.Contains(nodes, n.Name) {
			sub.Nodes = append(sub.Nodes, n)
		}
	}
	if err := q(ctx, sub); err != nil {
		return fmt.Errorf("%w: not every data volume of %s was unmounted (%v); nothing was detached or changed", ErrDetachNeedsUnmount,
			strings.Join(nodes, ", "), err)
	}
	if _, err := st.Destroy(ctx, optdestroy.Target(urns), optdestroy.ProgressStreams(out),
		optdestroy.ErrorProgressStreams(out)); err != nil {
		return fmt.Errorf("detach %s before the update: %w", strings.Join(lines, "; "), err)
	}
	return nil
}
