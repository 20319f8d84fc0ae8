package facts

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCollectThisMachine(t *testing.T) {
	f, err := Collect(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	uname, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	if f.Kernel != strings.TrimSpace(string(uname)) {
		t.Errorf("kernel %q, uname -r says %q", f.Kernel, uname)
	}
	nproc, _ := exec.Command("nproc", "--all").Output()
	if n, _ := strconv.Atoi(strings.TrimSpace(string(nproc))); f.CPUs != n {
		t.Errorf("cpus %d, nproc --all says %d", f.CPUs, n)
	}
	if f.CPUModel == "" || f.MemTotalBytes < 1<<28 || f.MemAvailableBytes == 0 || f.MemAvailableBytes > f.MemTotalBytes {
		t.Errorf("cpu/mem facts look wrong: %+v", f)
	}
	raw, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if !strings.Contains(string(raw), "["+f.THP.Enabled+"]") {
		t.Errorf("thp %q, file says %q", f.THP.Enabled, raw)
	}
	if len(f.BlockDevices) == 0 || f.BlockDevices[0].SizeBytes == 0 {
		t.Errorf("block devices: %+v", f.BlockDevices)
	}
	if f.Instance != nil || f.InstanceNote == "" {
		t.Errorf("not on EC2, yet instance %+v note %q", f.Instance, f.InstanceNote)
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	t.Logf("%s", b)
}

func write(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	os.MkdirAll(filepath.Dir(full), 0o755)
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A node as EC2 shows it, as a fake tree: an NVMe EBS volume and DMI saying Amazon.
func fakeEC2(t *testing.T) string {
	root := t.TempDir()
	write(t, root, "proc/sys/kernel/hostname", "ip-10-0-1-5\n")
	write(t, root, "proc/sys/kernel/osrelease", "6.1.0-aws\n")
	write(t, root, "proc/cpuinfo", "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\n\n")
	write(t, root, "proc/meminfo", "MemTotal:       131072000 kB\nMemFree:        100000000 kB\nMemAvailable:   120000000 kB\n")
	write(t, root, "proc/loadavg", "0.50 0.25 0.10 1/200 1234\n")
	write(t, root, "etc/os-release", "NAME=\"Amazon Linux\"\nPRETTY_NAME=\"Amazon Linux 2023\"\n")
	write(t, root, "sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n")
	write(t, root, "sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never\n")
	write(t, root, "sys/block/nvme1n1/size", "2097152\n")
	write(t, root, "sys/block/nvme1n1/queue/rotational", "0\n")
	write(t, root, "sys/block/nvme1n1/device/model", "Amazon Elastic Block Store              \n")
	write(t, root, "sys/block/nvme1n1/device/serial", "vol0abc123def4567890\n")
	write(t, root, "sys/block/loop0/size", "0\n")
	write(t, root, "sys/devices/virtual/dmi/id/board_vendor", "Amazon EC2\n")
	return root
}

// imdsServer answers like IMDSv2: a PUT for a token, then reads that present it.
func imdsServer(t *testing.T) *httptest.Server {
	const token = "tok-123"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			if r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") == "" {
				http.Error(w, "ttl missing", http.StatusBadRequest)
				return
			}
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
			w.Write([]byte(token))
		case r.Method == http.MethodGet && r.URL.Path == "/latest/dynamic/instance-identity/document":
			if r.Header.Get("X-Aws-Ec2-Metadata-Token") != token {
				http.Error(w, "IMDSv1 refused", http.StatusUnauthorized)
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"instanceId": "i-0123456789abcdef0", "instanceType": "c6in.16xlarge",
				"region": "us-east-1", "availabilityZone": "us-east-1a", "imageId": "ami-0abc", "architecture": "x86_64",
				"privateIp": "10.0.1.5", "accountId": "123456789012", "pendingTime": "2026-01-01T00:00:00Z"})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCollectFakeEC2(t *testing.T) {
	root := fakeEC2(t)
	srv := imdsServer(t)
	f, err := Collect(context.Background(), Options{Root: root, IMDSEndpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if f.Hostname != "ip-10-0-1-5" || f.Kernel != "6.1.0-aws" || f.OS != "Amazon Linux 2023" || f.CPUs != 2 ||
		!strings.Contains(f.CPUModel, "8375C") || f.MemTotalBytes != 131072000*1024 || f.Load.Load1 != 0.5 ||
		f.THP.Enabled != "never" || f.THP.Defrag != "madvise" {
		t.Fatalf("facts: %+v", f)
	}
	if len(f.BlockDevices) != 1 {
		t.Fatalf("loop devices must be left out: %+v", f.BlockDevices)
	}
	d := f.BlockDevices[0]
	if d.Name != "nvme1n1" || d.SizeBytes != 1<<30 || d.Rotational || d.Model != "Amazon Elastic Block Store" || d.VolumeID != "vol-0abc123def4567890" {
		t.Fatalf("device: %+v", d)
	}
	if f.Instance == nil || f.Instance.ID != "i-0123456789abcdef0" || f.Instance.Type != "c6in.16xlarge" || f.Instance.AvailabilityZone != "us-east-1a" {
		t.Fatalf("instance %+v note %q", f.Instance, f.InstanceNote)
	}
	if b, _ := json.Marshal(f); strings.Contains(string(b), "123456789012") {
		t.Fatal("the account id must not reach results")
	}
}

// A metadata endpoint that accepts and never answers costs the timeout, not more.
func TestIMDSTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	start := time.Now()
	f, err := Collect(context.Background(), Options{Root: fakeEC2(t), IMDSEndpoint: "http://" + ln.Addr().String(), IMDSTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if f.Instance != nil || !strings.Contains(f.InstanceNote, "unavailable") {
		t.Fatalf("instance %+v note %q", f.Instance, f.InstanceNote)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %s with a 300ms timeout", d)
	}
}
