package recording

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/rundir"
)

// buildProbe compiles testdata/JfrProbe.java into a temporary folder.
func buildProbe(t testing.TB) string {
	t.Helper()
	tools.Require(t, "java")
	javac := tools.Require(t, "javac")
	tools.Require(t, "jfr")
	dir := t.TempDir()
	src, err := filepath.Abs("testdata/JfrProbe.java")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(javac, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	return dir
}

func byKind(spans []rundir.InsideSpan) map[rundir.InsideKind][]rundir.InsideSpan {
	m := map[rundir.InsideKind][]rundir.InsideSpan{}
	for _, s := range spans {
		m[s.Kind] = append(m[s.Kind], s)
	}
	return m
}

// TestJFRReader records a real JVM with rig.jfc and reads the file: every force and write of
// the program's segment file with its role, the System.gc() pauses, the parks, the monitor
// waits and CPU samples of its loop.
func TestJFRReader(t *testing.T) {
	cp := buildProbe(t)
	tmp := t.TempDir()
	jfc := filepath.Join(tmp, JFCName)
	if err := os.WriteFile(jfc, JFC, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(tmp, "data")
	rec := filepath.Join(tmp, "out.jfr")
	const loops = 6
	before := time.Now()
	cmd := exec.Command("java", "-XX:StartFlightRecording=name=rig,settings="+jfc+",filename="+rec,
		"-cp", cp, "JfrProbe", data, "6")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("java: %v: %s", err, out)
	}
	after := time.Now()
	spans, err := formats.Read(context.Background(), FormatJFR, rec, Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	k := byKind(spans)
	for _, s := range spans {
		if s.AtNs < before.UnixNano() || s.AtNs > after.UnixNano() || s.Source != "jfr" {
			t.Fatalf("span outside the program's life or of another source: %+v", s)
		}
	}
	if n := len(k[rundir.InsideForce]); n != loops {
		t.Errorf("forces: %d, want %d (one per loop)", n, loops)
	}
	for _, s := range k[rundir.InsideForce] {
		if s.File != "archive/0-0.rec" || s.Role != rundir.RoleArchiveSegment || s.Thread != "main" || s.Detail != "JfrProbe.main" || s.DurNs <= 0 {
			t.Errorf("force: %+v, want archive/0-0.rec, archive_segment, thread main, at JfrProbe.main, a duration", s)
		}
	}
	writes := 0
	for _, s := range k[rundir.InsideWrite] {
		switch {
		case s.File == "archive/0-0.rec" && s.Bytes == 4096 && s.Role == rundir.RoleArchiveSegment:
			writes++
		case s.File == "" && s.Detail == "stdout or stderr": // its "loop N" lines
		default:
			t.Errorf("write: %+v, want 4096 bytes to the archive segment, or stdout", s)
		}
	}
	if writes != loops {
		t.Errorf("writes to the segment: %d, want %d", writes, loops)
	}
	gcs := 0
	for _, s := range k[rundir.InsideGCPause] {
		if strings.Contains(s.Detail, "System.gc()") && s.DurNs > 0 {
			gcs++
		}
	}
	if gcs < loops {
		t.Errorf("gc pauses caused by System.gc(): %d, want ≥ %d: %+v", gcs, loops, k[rundir.InsideGCPause])
	}
	parks := 0
	for _, s := range k[rundir.InsidePark] {
		if s.Detail == "JfrProbe.main" && s.DurNs >= int64(25*time.Millisecond) {
			parks++
		}
	}
	if parks < loops {
		t.Errorf("parks of ≥ 25 ms at JfrProbe.main: %d, want ≥ %d: %+v", parks, loops, k[rundir.InsidePark])
	}
	waits := 0
	for _, s := range k[rundir.InsideMonitor] {
		if s.Detail == "wait java.lang.Object at JfrProbe.main" {
			waits++
		}
	}
	if waits < loops {
		t.Errorf("monitor waits: %d, want ≥ %d: %+v", waits, loops, k[rundir.InsideMonitor])
	}
	if len(k[rundir.InsideSafepoint]) == 0 {
		t.Errorf("no safepoint span (each System.gc() reaches one)")
	}
	cpu := 0
	for _, s := range k[rundir.InsideCPU] {
		if s.Detail == "JfrProbe.main" && s.Thread == "main" && s.DurNs == int64(JFRSamplePeriod) {
			cpu++
		}
	}
	if cpu == 0 {
		t.Errorf("no execution sample in JfrProbe.main's loop: %+v", k[rundir.InsideCPU])
	}
}

// TestKilledJVMRecordingReadable starts a JVM with the agent's options (a disk repository),
// dumps its recording (JFR.dump) while it runs, then kills it with SIGKILL: its repository's
// chunks, assembled, still hold the forces up to its last flush.
func TestKilledJVMRecordingReadable(t *testing.T) {
	cp := buildProbe(t)
	tmp := t.TempDir()
	recDir := filepath.Join(tmp, "recordings")
	opts, err := JVMOptions(recDir)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(tmp, "data")
	cmd := exec.Command("java", "-cp", cp, "JfrProbe", data, "100000")
	cmd.Env = append(os.Environ(), JVMOptionsEnv+"="+opts)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	loops := 0
	sc := bufio.NewScanner(out)
	waitLoops := func(n int) {
		for loops < n && sc.Scan() {
			if strings.HasPrefix(sc.Text(), "loop ") {
				loops++
			}
		}
		if loops < n {
			t.Fatalf("the JVM stopped after %d loops", loops)
		}
	}
	waitLoops(5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dump := filepath.Join(tmp, "live.jfr")
	if err := DumpJFR(ctx, cmd.Process.Pid, time.Now().Add(-time.Minute), dump); err != nil {
		t.Fatal(err)
	}
	live, err := formats.Read(ctx, FormatJFR, dump, Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(byKind(live)[rundir.InsideForce]); n < 5 {
		t.Errorf("live dump after 5 loops: %d forces, want ≥ 5", n)
	}
	waitLoops(20)
	time.Sleep(2 * time.Second) // past the disk recording's 1 s flush
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	jvms, err := JVMRecordings(recDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(jvms) != 1 || jvms[0].PID != cmd.Process.Pid {
		t.Fatalf("repository folders: %+v, want one of pid %d", jvms, cmd.Process.Pid)
	}
	file := filepath.Join(tmp, "killed.jfr")
	if n, err := AssembleJFR(jvms[0].Dir, file); err != nil || n == 0 {
		t.Fatalf("assemble: %d chunks, %v", n, err)
	}
	spans, err := formats.Read(ctx, FormatJFR, file, Options{DataDir: data})
	if err != nil {
		t.Fatalf("read a SIGKILLed JVM's chunks: %v", err)
	}
	if n := len(byKind(spans)[rundir.InsideForce]); n < 20 {
		t.Errorf("killed JVM's repository: %d forces, want ≥ 20 (the loops printed before the last flush)", n)
	}
}

func TestParseISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT0.005602434S": 5602434 * time.Nanosecond,
		"PT1M2.5S":       62500 * time.Millisecond,
		"PT2H":           2 * time.Hour,
		"P1DT1S":         24*time.Hour + time.Second,
		"PT0S":           0,
	} {
		got, err := parseISODuration(in)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0.5S", "P1M", "PTxS"} {
		if _, err := parseISODuration(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestFileRole(t *testing.T) {
	for _, c := range []struct{ path, rel, role string }{
		{"/d/archive/12-0.rec", "archive/12-0.rec", rundir.RoleArchiveSegment},
		{"/d/cluster/recording.log", "cluster/recording.log", rundir.RoleLog},
		{"/d/raft/log/seg-01", "raft/log/seg-01", rundir.RoleLog},
		{"/d/snapshots/7.snap", "snapshots/7.snap", rundir.RoleSnapshot},
		{"/elsewhere/x.dat", "/elsewhere/x.dat", rundir.RoleOther},
		{"/d/archive/archive.catalog", "archive/archive.catalog", rundir.RoleOther},
	} {
		rel, role := FileRole("/d", c.path)
		if rel != c.rel || role != c.role {
			t.Errorf("%s: %s %s, want %s %s", c.path, rel, role, c.rel, c.role)
		}
	}
}
