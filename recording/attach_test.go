package recording

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/tools"
)

// startProbeJVM runs JfrProbe (no recording) until the test ends, once it has looped.
func startProbeJVM(t testing.TB, cp string) int {
	t.Helper()
	cmd := exec.Command("java", "-cp", cp, "JfrProbe", filepath.Join(t.TempDir(), "data"), "100000")
	cmd.Dir = t.TempDir()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 4096)
	for got := ""; !strings.Contains(got, "loop "); {
		n, err := out.Read(buf)
		if err != nil {
			t.Fatalf("the JVM ended before its first loop: %v", err)
		}
		got += string(buf[:n])
	}
	go func() { // keep its stdout drained
		for {
			if _, err := out.Read(buf); err != nil {
				return
			}
		}
	}()
	return cmd.Process.Pid
}

// A diagnostic command through the attach socket answers as jcmd's does, a second command
// reuses the socket the first opened, the attach file is gone afterwards, and a command the
// JVM does not know is an error naming it.
func TestJVMCommandAnswersAsJcmd(t *testing.T) {
	jcmd := tools.Require(t, "jcmd")
	pid := startProbeJVM(t, buildProbe(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := jvmCommand(ctx, pid, "VM.version")
	if err != nil {
		t.Fatal(err)
	}
	jc, err := exec.Command(jcmd, strconv.Itoa(pid), "VM.version").CombinedOutput()
	if err != nil {
		t.Fatalf("jcmd: %v: %s", err, jc)
	}
	if !strings.Contains(out, "JDK") || !strings.Contains(string(jc), strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])) {
		t.Errorf("attach answered %q; jcmd %q", out, jc)
	}
	if _, err := jvmCommand(ctx, pid, "VM.uptime"); err != nil {
		t.Errorf("a second command: %v", err)
	}
	cwd, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if _, err := os.Stat(filepath.Join(cwd, ".attach_pid"+strconv.Itoa(pid))); err == nil {
		t.Error("the attach file is left in the JVM's folder")
	}
	if _, err := jvmCommand(ctx, pid, "No.such.command"); err == nil || !strings.Contains(err.Error(), "No.such.command") {
		t.Errorf("an unknown command: %v", err)
	}
}

// BenchmarkJVMCommand prices a diagnostic command (VM.version) sent by a jcmd process and
// through the attach socket: the CPU of this process and its children per command.
func BenchmarkJVMCommand(b *testing.B) {
	jcmd := tools.Require(b, "jcmd")
	pid := startProbeJVM(b, buildProbe(b))
	cpu := func() time.Duration {
		var self, kids syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &self)
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
		tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
		return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
	}
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"jcmd", func() error { return exec.Command(jcmd, strconv.Itoa(pid), "VM.version").Run() }},
		{"attach", func() error { _, err := jvmCommand(context.Background(), pid, "VM.version"); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			c0 := cpu()
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpu()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
