// Package facts describes a node for the results manifest: kernel, CPU, memory, THP, block
// devices, load, and (on EC2) the instance identity from IMDSv2.
package facts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"

	"github.com/rig-dev/rig/internal/loadavg"
)

// Options say where to look.
type Options struct {
	Root string // filesystem root of /proc, /sys and /etc ("/" on a node)
	// IMDSEndpoint overrides the instance metadata endpoint (tests). When empty, IMDS is asked
	// only if the DMI tables say this is an EC2 instance, so nothing is sent off a machine that
	// has no metadata service.
	IMDSEndpoint string
	IMDSTimeout  time.Duration // default 2 s for the whole identity lookup
}

// Facts describe one node at one moment.
type Facts struct {
	Hostname          string        `json:"hostname"`
	Kernel            string        `json:"kernel"`         // release, e.g. 6.1.0-18-cloud-amd64
	KernelVersion     string        `json:"kernel_version"` // build string
	OS                string        `json:"os,omitempty"`   // PRETTY_NAME of /etc/os-release
	Arch              string        `json:"arch"`
	CPUModel          string        `json:"cpu_model"`
	CPUs              int           `json:"cpus"`
	MemTotalBytes     uint64        `json:"mem_total_bytes"`
	MemAvailableBytes uint64        `json:"mem_available_bytes"`
	THP               THP           `json:"thp"`
	BlockDevices      []BlockDevice `json:"block_devices"`
	Load              LoadAvg       `json:"load"`
	Instance          *Instance     `json:"instance,omitempty"`
	// InstanceNote says why Instance is empty: not EC2, or IMDS did not answer.
	InstanceNote string    `json:"instance_note,omitempty"`
	CollectedAt  time.Time `json:"collected_at"`
}

// THP is the transparent huge page mode.
type THP struct {
	Enabled string `json:"enabled"`
	Defrag  string `json:"defrag"`
}

// LoadAvg is /proc/loadavg.
type LoadAvg struct {
	Load1  float64 `json:"load1"`
	Load5  float64 `json:"load5"`
	Load15 float64 `json:"load15"`
}

// BlockDevice is one entry of /sys/block.
type BlockDevice struct {
	Name       string `json:"name"`
	SizeBytes  uint64 `json:"size_bytes"`
	Rotational bool   `json:"rotational"`
	Model      string `json:"model,omitempty"`
	Serial     string `json:"serial,omitempty"`
	// VolumeID is the EBS volume behind an NVMe device (its serial, "vol0abc…", as "vol-0abc…"),
	// how the rig finds the data volume it provisioned.
	VolumeID string `json:"volume_id,omitempty"`
}

// Instance is the EC2 identity document, without the account id.
type Instance struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	Region           string `json:"region"`
	AvailabilityZone string `json:"availability_zone"`
	ImageID          string `json:"image_id"`
	Architecture     string `json:"architecture"`
	PrivateIP        string `json:"private_ip"`
}

// Memory reads MemTotal and MemAvailable of the machine whose /proc is under root ("/" here):
// what rig validate checks a local run's book against.
func Memory(root string) (total, available uint64, err error) {
	fs, err := procfs.NewFS(filepath.Join(root, "proc"))
	if err != nil {
		return 0, 0, fmt.Errorf("facts: %w", err)
	}
	return memory(fs)
}

func memory(fs procfs.FS) (total, available uint64, err error) {
	mem, err := fs.Meminfo()
	if err != nil {
		return 0, 0, fmt.Errorf("facts: meminfo: %w", err)
	}
	if mem.MemTotal != nil {
		total = *mem.MemTotal * 1024
	}
	if mem.MemAvailable != nil {
		available = *mem.MemAvailable * 1024
	}
	return total, available, nil
}

// Collect reads the facts. A missing optional source (os-release, a device's model) leaves its
// field empty; the kernel's own files failing to read is an error.
func Collect(ctx context.Context, opts Options) (Facts, error) {
	if opts.Root == "" {
		opts.Root = "/"
	}
	f := Facts{Arch: runtime.GOARCH, CollectedAt: time.Now().UTC()}
	at := func(p string) string { return filepath.Join(opts.Root, p) }
	var err error
	if f.Hostname, err = readTrim(at("proc/sys/kernel/hostname")); err != nil {
		return f, err
	}
	if f.Kernel, err = readTrim(at("proc/sys/kernel/osrelease")); err != nil {
		return f, err
	}
	f.KernelVersion, _ = readTrim(at("proc/sys/kernel/version"))
	f.OS = osRelease(at("etc/os-release"))

	fs, err := procfs.NewFS(at("proc"))
	if err != nil {
		return f, fmt.Errorf("facts: %w", err)
	}
	cpus, err := fs.CPUInfo()
	if err != nil {
		return f, fmt.Errorf("facts: cpuinfo: %w", err)
	}
	f.CPUs = len(cpus)
	if len(cpus) > 0 {
		f.CPUModel = cpus[0].ModelName
	}
	if f.MemTotalBytes, f.MemAvailableBytes, err = memory(fs); err != nil {
		return f, err
	}
	la, err := loadavg.Read(opts.Root)
	if err != nil {
		return f, fmt.Errorf("facts: loadavg: %w", err)
	}
	f.Load = LoadAvg{la.Load1, la.Load5, la.Load15}

	thp := at("sys/kernel/mm/transparent_hugepage")
	f.THP.Enabled = bracketed(thp + "/enabled")
	f.THP.Defrag = bracketed(thp + "/defrag")

	if f.BlockDevices, err = blockDevices(at("proc"), at("sys")); err != nil {
		return f, err
	}

	if opts.IMDSEndpoint == "" && !onEC2(opts.Root) {
		f.InstanceNote = "not an EC2 instance (DMI)"
		return f, nil
	}
	inst, err := identity(ctx, opts)
	if err != nil {
		f.InstanceNote = "instance metadata unavailable: " + err.Error()
		return f, nil
	}
	f.Instance = inst
	return f, nil
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("facts: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func bracketed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i >= 0 && j > i {
		return s[i+1 : j]
	}
	return strings.TrimSpace(s)
}

func osRelease(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// BlockDevices lists the block devices under root ("/" or "": this machine) with what /sys says
// of each, the EBS volume id of an NVMe device among it; the data volumes are found by it.
func BlockDevices(root string) ([]BlockDevice, error) {
	if root == "" {
		root = "/"
	}
	return blockDevices(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
}

func blockDevices(proc, sys string) ([]BlockDevice, error) {
	bfs, err := blockdevice.NewFS(proc, sys)
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	names, err := bfs.SysBlockDevices()
	if err != nil {
		return nil, fmt.Errorf("facts: block devices: %w", err)
	}
	sort.Strings(names)
	var out []BlockDevice
	for _, n := range names {
		if strings.HasPrefix(n, "loop") || strings.HasPrefix(n, "ram") {
			continue
		}
		d := BlockDevice{Name: n}
		d.SizeBytes, _ = bfs.SysBlockDeviceSize(n)
		if r, err := bfs.SysBlockDeviceRotational(n); err == nil {
			d.Rotational = r == 1
		}
		dev := filepath.Join(sys, "block", n, "device")
		d.Model, _ = readTrim(filepath.Join(dev, "model"))
		d.Serial, _ = readTrim(filepath.Join(dev, "serial"))
		if v, ok := strings.CutPrefix(d.Serial, "vol"); ok && !strings.HasPrefix(v, "-") && v != "" {
			d.VolumeID = "vol-" + v
		}
		out = append(out, d)
	}
	return out, nil
}

// onEC2 reads the DMI tables Nitro and Xen instances expose.
func onEC2(root string) bool {
	for _, p := range []string{"sys/devices/virtual/dmi/id/board_vendor", "sys/devices/virtual/dmi/id/sys_vendor", "sys/devices/virtual/dmi/id/bios_vendor"} {
		if v, _ := readTrim(filepath.Join(root, p)); strings.Contains(v, "Amazon") {
			return true
		}
	}
	uuid, _ := readTrim(filepath.Join(root, "sys/hypervisor/uuid"))
	return strings.HasPrefix(strings.ToLower(uuid), "ec2")
}

// identity asks IMDSv2 (token first, no IMDSv1 fallback) with one short deadline and no
// retries: a node without metadata must not stall the run.
func identity(ctx context.Context, opts Options) (*Instance, error) {
	timeout := opts.IMDSTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := imds.New(imds.Options{
		Endpoint:       opts.IMDSEndpoint,
		HTTPClient:     &http.Client{Timeout: timeout},
		Retryer:        aws.NopRetryer{},
		EnableFallback: aws.FalseTernary,
	})
	doc, err := c.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer within %s", timeout)
		}
		return nil, err
	}
	return &Instance{ID: doc.InstanceID, Type: doc.InstanceType, Region: doc.Region, AvailabilityZone: doc.AvailabilityZone,
		ImageID: doc.ImageID, Architecture: doc.Architecture, PrivateIP: doc.PrivateIP}, nil
}
