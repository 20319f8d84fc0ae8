package sample

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rig-dev/rig/rundir"
)

// ENA interfaces are found by their driver link, and their receive drops summed per queue,
// falling back to the device counter, from what ethtool -S prints.
func TestNICDrops(t *testing.T) {
	root := t.TempDir()
	for iface, drv := range map[string]string{"ens5": "ena", "lo": "", "eth1": "virtio_net"} {
		dev := filepath.Join(root, "sys/class/net", iface, "device")
		os.MkdirAll(dev, 0o755)
		if drv != "" {
			os.Symlink(filepath.Join("../../../../bus/pci/drivers", drv), filepath.Join(dev, "driver"))
		}
	}
	if got := enaIfaces(root); !slices.Equal(got, []string{"ens5"}) {
		t.Fatalf("ENA interfaces %v, want [ens5]", got)
	}
	fake := func(out string) string {
		p := filepath.Join(t.TempDir(), "ethtool")
		os.WriteFile(p, []byte("#!/bin/sh\n[ \"$1\" = -S ] || exit 2\ncat <<'X'\n"+out+"X\n"), 0o755)
		return p
	}
	queues := fake("NIC statistics:\n     rx_drops: 7\n     queue_0_rx_drops: 3\n     queue_1_rx_drops: 4\n     queue_1_rx_cnt: 900\n     pps_allowance_exceeded: 2\n")
	if v, ok := nicDrops(queues, "ens5"); !ok || v != 7 {
		t.Errorf("per-queue drops %d %v, want 7", v, ok)
	}
	device := fake("NIC statistics:\n     rx_drops: 11\n     tx_drops: 5\n")
	if v, ok := nicDrops(device, "ens5"); !ok || v != 11 {
		t.Errorf("device drops %d %v, want 11", v, ok)
	}
	if _, ok := nicDrops(filepath.Join(t.TempDir(), "missing"), "ens5"); ok {
		t.Error("no ethtool: want no reading")
	}
	s := compute(&snapshot{nics: map[string]uint64{"ens5": 10}}, &snapshot{nics: map[string]uint64{"ens5": 25}}, 1, 2, nil)
	if len(s.NICs) != 1 || s.NICs[0] != (rundir.SampleNIC{Iface: "ens5", RxDrops: 25, RxDropsDelta: 15}) {
		t.Errorf("sample NICs %+v", s.NICs)
	}
}
