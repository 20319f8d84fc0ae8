package recording

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// How a JVM engine records and how its recording is taken (docs/engines.md, "Inside a JVM
// engine"). The JVM records to a disk repository from its start, so a JVM killed with SIGKILL
// leaves its chunks there up to its last flush (JDK 17 flushes a disk recording about once a
// second; a killed JVM's last chunk is readable as it stands: TestKilledJVMRecordingReadable).
// A running JVM's recording is dumped with JFR.dump, sent as jcmd would (jvmCommand).

// JFRRecordingName is the recording's name in the JVM (JFR.dump name=…).
const JFRRecordingName = "rig"

// JFRRepository is the repository folder under a node's recordings folder; the JVM makes a
// folder in it per process, named <start time>_<pid>.
const JFRRepository = "jfr-repository"

// jfrMaxChunk bounds a chunk file (JDK's default is 12 MB): a chunk is the unit a killed
// JVM's repository is read in.
const jfrMaxChunk = "4m"

// JVMOptionsEnv is the environment variable the agent hands a JVM engine its recording options
// in: the java launcher (JDK 9+) reads it before its command line, so a wrapper script that
// execs java needs no change, and the JDK's other tools (jcmd, jfr) do not read it.
const JVMOptionsEnv = "JDK_JAVA_OPTIONS"

// JVMOptions writes rig.jfc into recDir, makes the repository, and returns the options that
// start the recording at JVM start, for JVMOptionsEnv.
func JVMOptions(recDir string) (string, error) { return jvmOptions(recDir, true) }

// JVMWindowOptions are JVMOptions but for the recording's start: the JVM is given its
// repository only, and StartJFR starts its recording around each window.
func JVMWindowOptions(recDir string) (string, error) { return jvmOptions(recDir, false) }

func jvmOptions(recDir string, atStart bool) (string, error) {
	abs, err := filepath.Abs(recDir)
	if err != nil {
		return "", err
	}
	// The option's own syntax splits at commas and the variable at spaces.
	if strings.ContainsAny(abs, ", \t\n'\"=") {
		return "", fmt.Errorf("recordings folder %q: a JVM option cannot carry a path with a comma, space, quote or '='", abs)
	}
	repo := filepath.Join(abs, JFRRepository)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return "", fmt.Errorf("make JFR repository: %w", err)
	}
	jfc := filepath.Join(abs, JFCName)
	if err := os.WriteFile(jfc, JFC, 0o644); err != nil {
		return "", fmt.Errorf("write JFR settings: %w", err)
	}
	opts := fmt.Sprintf("-XX:FlightRecorderOptions=repository=%s,maxchunksize=%s", repo, jfrMaxChunk)
	if atStart {
		opts = fmt.Sprintf("-XX:StartFlightRecording=name=%s,settings=%s,disk=true ", JFRRecordingName, jfc) + opts
	}
	return opts, nil
}

// StartJFR starts rig's recording (rig.jfc, already written into recDir by JVMWindowOptions) in
// a running JVM; StopJFR stops it, leaving its chunks in the repository until the JVM exits.
func StartJFR(ctx context.Context, pid int, recDir string) error {
	jfc, err := filepath.Abs(filepath.Join(recDir, JFCName))
	if err != nil {
		return err
	}
	return jfrCommand(ctx, pid, "Started recording", "JFR.start", "name="+JFRRecordingName, "settings="+jfc, "disk=true")
}

// StopJFR stops rig's recording in a running JVM.
func StopJFR(ctx context.Context, pid int) error {
	return jfrCommand(ctx, pid, "Stopped recording", "JFR.stop", "name="+JFRRecordingName)
}

// jfrCommand runs a JFR diagnostic command in JVM pid (jvmCommand); its answer must contain ok,
// as the JVM answers code 0 to a JFR command it refused.
func jfrCommand(ctx context.Context, pid int, ok string, args ...string) error {
	out, err := jvmCommand(ctx, pid, args...)
	if err != nil {
		return err
	}
	if !strings.Contains(out, ok) {
		return fmt.Errorf("JVM %d %s: %s", pid, args[0], strings.TrimSpace(out))
	}
	return nil
}

// JVMsUnder lists the JVMs (processes named java) that are pid or its descendants: a JVM
// engine's command may be java itself or a script that starts it.
func JVMsUnder(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	java := map[int]bool{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so split at the last ')'.
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
		java[p] = s[open+1:close] == "java"
	}
	var out []int
	for p := range parent {
		if !java[p] {
			continue
		}
		for q, hops := p, 0; q > 1 && hops < 64; q, hops = parent[q], hops+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	sort.Ints(out)
	return out
}

// JVMRecording is one JVM's folder in the repository.
type JVMRecording struct {
	PID   int
	Dir   string
	Start string // the folder name's start time, as the JVM wrote it
}

// JVMRecordings lists the JVMs that recorded into recDir's repository, oldest first.
func JVMRecordings(recDir string) ([]JVMRecording, error) {
	ents, err := os.ReadDir(filepath.Join(recDir, JFRRepository))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []JVMRecording
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		i := strings.LastIndexByte(e.Name(), '_')
		pid, err := strconv.Atoi(e.Name()[i+1:])
		if i < 0 || err != nil {
			continue
		}
		out = append(out, JVMRecording{PID: pid, Dir: filepath.Join(recDir, JFRRepository, e.Name()), Start: e.Name()[:i]})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Start < out[b].Start })
	return out, nil
}

// DumpJFR has a running JVM write its recording from begin on (JFR.dump keeps whole chunks, so
// the file may hold some earlier events) to file.
func DumpJFR(ctx context.Context, pid int, begin time.Time, file string) error {
	args := []string{"JFR.dump", "name=" + JFRRecordingName, "filename=" + file}
	if !begin.IsZero() {
		args = append(args, "begin="+begin.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	out, err := jvmCommand(ctx, pid, args...)
	if err != nil {
		return err
	}
	// The JVM answers 0 even when it refused the command: the file says whether it worked.
	if st, err := os.Stat(file); err != nil || st.Size() == 0 {
		return fmt.Errorf("JVM %d JFR.dump wrote no recording: %s", pid, strings.TrimSpace(out))
	}
	return nil
}

// AssembleJFR concatenates a (dead) JVM's repository chunks into one recording file, as `jfr
// assemble` does: a JFR file is a sequence of chunks.
func AssembleJFR(dir, file string) (int, error) {
	chunks, err := filepath.Glob(filepath.Join(dir, "*.jfr"))
	if err != nil {
		return 0, err
	}
	sort.Strings(chunks) // named by their start time
	out, err := os.Create(file)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range chunks {
		in, err := os.Open(c)
		if err != nil {
			out.Close()
			return n, err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			out.Close()
			return n, fmt.Errorf("assemble %s: %w", c, err)
		}
		n++
	}
	return n, out.Close()
}
