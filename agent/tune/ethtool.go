package tune

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// isKernelFile reports whether path is on procfs or sysfs, where the kernel formats what a read
// returns; anything else is a fake tree of regular files.
func isKernelFile(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.PROC_SUPER_MAGIC || st.Type == unix.SYSFS_MAGIC
}

func ringParts(name string) (iface, which string) {
	m := ringKey.FindStringSubmatch(name)
	return m[1], m[2]
}

// rings is what `ethtool -g` reports.
type rings struct {
	MaxRX, MaxTX, RX, TX int
}

func (r rings) current(which string) int {
	if which == "rx" {
		return r.RX
	}
	return r.TX
}

func (r rings) max(which string) int {
	if which == "rx" {
		return r.MaxRX
	}
	return r.MaxTX
}

func ethtool(ctx context.Context, opts Options, args ...string) ([]byte, error) {
	bin := opts.Ethtool
	if bin == "" {
		if opts.Root != "/" {
			return nil, fmt.Errorf("ring sizes live in the NIC driver, not under root %s; refusing to change a real interface while tuning a fake tree", opts.Root)
		}
		bin = "ethtool"
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func readRings(ctx context.Context, opts Options, iface string) (rings, error) {
	out, err := ethtool(ctx, opts, "-g", iface)
	if err != nil {
		return rings{}, err
	}
	return parseRings(out)
}

// parseRings reads `ethtool -g` output: a "Pre-set maximums:" and a "Current hardware
// settings:" section, each with "RX:" and "TX:" lines (other lines, such as "RX Mini:", vary by
// driver and version and are ignored).
func parseRings(out []byte) (rings, error) {
	var r rings
	var section string
	found := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Pre-set maximums"):
			section = "max"
			continue
		case strings.HasPrefix(line, "Current hardware settings"):
			section = "cur"
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || section == "" || (k != "RX" && k != "TX") {
			continue
		}
		v = strings.TrimSpace(v)
		n, err := strconv.Atoi(v)
		if err != nil {
			if v == "n/a" {
				n = 0
			} else {
				return rings{}, fmt.Errorf("ethtool -g: %s %s: %q is not a number", section, k, v)
			}
		}
		switch section + k {
		case "maxRX":
			r.MaxRX = n
		case "maxTX":
			r.MaxTX = n
		case "curRX":
			r.RX = n
		case "curTX":
			r.TX = n
		}
		found[section+k] = true
	}
	for _, k := range []string{"maxRX", "maxTX", "curRX", "curTX"} {
		if !found[k] {
			return rings{}, fmt.Errorf("ethtool -g output has no %s line:\n%s", k, out)
		}
	}
	return r, nil
}

func setRing(ctx context.Context, opts Options, iface, which, value string) error {
	n, err := strconv.Atoi(value)
	if err != nil {
		return err
	}
	r, err := readRings(ctx, opts, iface)
	if err != nil {
		return err
	}
	if m := r.max(which); m > 0 && n > m {
		return fmt.Errorf("%s supports at most %d %s descriptors", iface, m, which)
	}
	_, err = ethtool(ctx, opts, "-G", iface, which, value)
	return err
}
