package sample

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// perQueueDrop matches per-queue receive drop counters (rx_queue_0_rx_drops, queue_3_rx_drops);
// deviceDrop the device-wide ones, used only when there are no per-queue counters.
var (
	perQueueDrop = regexp.MustCompile(`^(rx_)?queue_\d+_rx_drops?$`)
	deviceDrop   = regexp.MustCompile(`^rx_drops?$`)
)

// enaIfaces lists the interfaces whose driver is ena, under root's /sys/class/net.
func enaIfaces(root string) []string {
	dir := filepath.Join(root, "sys/class/net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		drv, err := os.Readlink(filepath.Join(dir, e.Name(), "device/driver"))
		if err == nil && filepath.Base(drv) == "ena" {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// nicDrops runs `ethtool -S iface` and sums its receive drop counters.
func nicDrops(bin, iface string) (uint64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-S", iface).Output()
	if err != nil {
		return 0, false
	}
	var queues, device uint64
	perQueue := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			continue
		}
		switch name = strings.TrimSpace(name); {
		case perQueueDrop.MatchString(name):
			queues += v
			perQueue = true
		case deviceDrop.MatchString(name):
			device += v
		}
	}
	if perQueue {
		return queues, true
	}
	return device, true
}
