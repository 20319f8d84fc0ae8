package untrusted

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// allocated returns the bytes f allocates (all goroutines; tests here run one at a time).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func nestedBlockMapping(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return b.String()
}

// The inputs that cost the parser tens of gigabytes are refused with the limit and where it was
// crossed, having allocated next to nothing: the scan runs before any parser.
func TestDeepNestingRefusedBeforeMemoryIsSpent(t *testing.T) {
	cases := []struct {
		name, data string
		line, col  int
	}{
		// the top-level mapping is the first level, so the 64th bracket is one too many
		{"brackets", "description: " + strings.Repeat("[", 400_000) + "\n", 1, 14 + MaxDepth - 1},
		{"flow mapping", "description: " + strings.Repeat("{a: ", 125_000) + "\n", 1, 14 + 4*(MaxDepth-1)},
		{"block mapping", nestedBlockMapping(500_000), MaxDepth + 1, MaxDepth + 1},
		{"block lists", strings.Repeat("- ", 250_000) + "x\n", 1, 2*MaxDepth + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			data := []byte(c.data)
			bytes := allocated(func() { _, err = ParseYAML("deep.yaml", data) })
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("got %v, want a refusal for depth", err)
			}
			want := "deep.yaml:" + strconv.Itoa(c.line) + ":" + strconv.Itoa(c.col) + ": nested more than 64 levels deep"
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got %q, want it to start %q", err, want)
			}
			if bytes > 64<<10 {
				t.Errorf("refusing %d bytes allocated %d bytes; want under 64 KiB", len(c.data), bytes)
			}
		})
	}
}

// Depth up to the limit passes, one more level is refused: the limit is the limit, not a
// round figure near it.
func TestDepthLimitIsExact(t *testing.T) {
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := ParseYAML("ok.yaml", []byte(ok)); err != nil {
		t.Errorf("%d levels: %v", MaxDepth, err)
	}
	over := "[" + ok + "]"
	if _, err := ParseYAML("over.yaml", []byte(over)); !errors.Is(err, ErrLimit) {
		t.Errorf("%d levels: got %v, want refused", MaxDepth+1, err)
	}
	if _, err := ParseYAML("ok.yaml", []byte(nestedBlockMapping(1)+"")); err != nil {
		t.Errorf("one mapping: %v", err)
	}
}

// A wide file is refused by its number of values before the parser makes a token of each
// (a 1 MiB flow list is a million tokens, hundreds of MB to the parser).
func TestTooManyValuesRefused(t *testing.T) {
	data := []byte("a: [" + strings.Repeat("1,", 400_000) + "]\n")
	var err error
	bytes := allocated(func() { _, err = ParseYAML("wide.yaml", data) })
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "more than 10000 values") {
		t.Fatalf("got %v, want a refusal for the number of values", err)
	}
	if !strings.HasPrefix(err.Error(), "wide.yaml:1:") {
		t.Errorf("no position: %v", err)
	}
	if bytes > 64<<10 {
		t.Errorf("allocated %d bytes; want under 64 KiB", bytes)
	}
	lines := strings.Repeat("k: v\n", MaxNodes) // 10,000 keys, twice the values
	if _, err := ParseYAML("lines.yaml", []byte(lines)); !errors.Is(err, ErrLimit) {
		t.Errorf("%d mapping entries: got %v, want refused", MaxNodes, err)
	}
}

// An alias bomb is small to parse and huge to decode; the expansion is counted on the tree,
// before any decoder walks it.
func TestAliasBombRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		b.WriteString(name + ": &" + name + " [")
		for k := 0; k < 10; k++ {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*" + prev)
		}
		b.WriteString("]\n")
		prev = name
	}
	_, err := ParseYAML("laughs.yaml", []byte(b.String()))
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "aliases expand to more than 100000 values") {
		t.Fatalf("got %v, want the alias expansion refused", err)
	}
	if !strings.HasPrefix(err.Error(), "laughs.yaml:5:") { // d's tenth *c: 11+10*11... crosses at line 5
		t.Errorf("position: %v", err)
	}
	// A few aliases, as a playbook may use to repeat a value, are fine.
	if _, err := ParseYAML("ok.yaml", []byte("a: &v 10s\nb: *v\nc: [*v, *v]\n")); err != nil {
		t.Errorf("small aliases: %v", err)
	}
}

// A FIFO is refused at once: nobody is writing to it, and an open without O_NONBLOCK would
// wait for a writer for ever.
func TestFIFORefusedWithoutBlocking(t *testing.T) {
	p := filepath.Join(t.TempDir(), "Pulumi.dev.yaml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(p, "stack config"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a named pipe (FIFO)") {
			t.Fatalf("got %v, want it refused as a FIFO", err)
		}
	case <-time.After(30 * time.Second): // a guard against hanging the suite, not a measurement
		t.Fatal("ReadFile blocked on a FIFO")
	}
}

func TestNonRegularFilesRefused(t *testing.T) {
	dir := t.TempDir()
	for path, kind := range map[string]string{dir: "a directory", "/dev/null": "a character device"} {
		_, err := ReadFile(path, "playbook")
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), kind) {
			t.Errorf("%s: got %v, want refused as %s", path, err, kind)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "none.yaml"), "playbook"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v, want os.ErrNotExist", err)
	}
}

// A 50 MB stack config is refused by its size, read not at all.
func TestLargeFileRefusedBeforeReading(t *testing.T) {
	p := filepath.Join(t.TempDir(), "Pulumi.big.yaml")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	f.Close()
	var rerr error
	bytes := allocated(func() { _, rerr = ReadFile(p, "stack config") })
	if !errors.Is(rerr, ErrTooLarge) || !strings.Contains(rerr.Error(), "52428800 bytes; a stack config may be at most 1048576 bytes") {
		t.Fatalf("got %v, want refused by size", rerr)
	}
	if bytes > 64<<10 {
		t.Errorf("refusing it allocated %d bytes; want under 64 KiB (the file must not be read)", bytes)
	}
	// Exactly the limit is read.
	if err := os.Truncate(p, MaxBytes); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p, "stack config"); err != nil || len(b) != MaxBytes {
		t.Errorf("a file of exactly %d bytes: %d bytes, %v", MaxBytes, len(b), err)
	}
}

// Text that looks like structure inside quotes, comments and block scalars is text.
func TestTextIsNotStructure(t *testing.T) {
	deep := strings.Repeat("[{", 100)
	for _, in := range []string{
		"description: \"" + deep + "\"\n",
		"description: '" + deep + "'\n",
		"description: x # " + deep + "\n",
		"description: |\n  " + deep + "\n  more\nname: x\n",
		"description: it's " + deep + "\n",
		"description: a\n  " + deep + "\n  continued\n",
		"{\"a\": \"" + deep + "\", \"b\": [1, 2]}",
	} {
		if err := Check("t.yaml", []byte(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func BenchmarkCheckDeep(b *testing.B) {
	data := []byte("description: " + strings.Repeat("[", 400_000) + "\n")
	b.ReportAllocs()
	for b.Loop() {
		if err := Check("deep.yaml", data); err == nil {
			b.Fatal("not refused")
		}
	}
}

func BenchmarkCheckPlaybookSized(b *testing.B) {
	data := []byte(strings.Repeat("- {at: 10s, kill: {node: follower, signal: KILL}}\n", 200))
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := Check("p.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

// Every YAML and JSON file in the repository (playbooks, stack configs, testdata) is within
// the limits: they hold against attacks, not against real inputs.
func TestRepositoryInputsWithinLimits(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "results" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		data, err := ReadFile(path, "input")
		if err != nil {
			t.Errorf("%v", err)
			return nil
		}
		if _, err := ParseYAML(path, data); errors.Is(err, ErrLimit) {
			t.Errorf("%v", err)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 5 {
		t.Fatalf("only %d files found under %s", checked, root)
	}
	t.Logf("%d files within the limits", checked)
}

// ReadFileIn confines the path to its root (a symlink out is refused, one inside followed) and
// keeps ReadFile's other limits with its own size; Open refuses what ReadFile refuses, without
// blocking on a FIFO.
func TestReadFileInAndOpen(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.json"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "out.json"))
	os.Symlink("in.json", filepath.Join(dir, "link.json"))
	os.Symlink("/dev/zero", filepath.Join(dir, "zero.json"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	read := func(name string, limit int64) error {
		_, err := ReadFileIn(root, name, filepath.Join(dir, name), "sweep.json", limit)
		return err
	}
	if err := read("in.json", 5); err != nil {
		t.Errorf("in.json: %v", err)
	}
	if err := read("link.json", 5); err != nil {
		t.Errorf("a link inside the root: %v", err)
	}
	if err := read("in.json", 4); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "may be at most 4 bytes") {
		t.Errorf("over its limit: %v", err)
	}
	if err := read("out.json", 5); err == nil || !strings.Contains(err.Error(), "escapes") {
		t.Errorf("a link out of the root: %v, want refused", err)
	}
	if err := read("zero.json", 5); err == nil {
		t.Errorf("a link to /dev/zero: read")
	}
	if err := read("fifo.json", 5); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a FIFO: %v", err)
	}
	if f, err := Open(filepath.Join(dir, "fifo.json"), "history"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("Open of a FIFO: %v", err)
		if f != nil {
			f.Close()
		}
	}
	if _, err := Open(filepath.Join(dir, "zero.json"), "history"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "character device") {
		t.Errorf("Open of a link to /dev/zero: %v", err)
	}
	f, err := Open(filepath.Join(dir, "in.json"), "history")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
