package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewAeronServiceWritesModule: the scaffold holds the module, the playbook and the example's
// start script (executable) and node template, byte for byte, with the service and NAME in place.
func TestNewAeronServiceWritesModule(t *testing.T) {
	dir := t.TempDir()
	out, errOut, err := runRig(t, "new", "aeron-service", "echo", "--service", "io.aeron.samples.cluster.EchoService", "--dir", dir)
	if err != nil {
		t.Fatalf("rig new aeron-service: %v\n%s", err, errOut)
	}
	mod := filepath.Join(dir, "echo")
	if !strings.Contains(out, mod) || !strings.Contains(out, "Codec.java") {
		t.Errorf("output does not name the folder and the codec:\n%s", out)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(mod, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	src := "src/main/java/io/aeron/samples/cluster/rig/"
	for name, wants := range map[string][]string{
		"pom.xml":              {"<artifactId>rig-aeron-parent</artifactId>", "<finalName>echo</finalName>", "<mainClass>io.aeron.samples.cluster.rig.Main</mainClass>"},
		src + "Main.java":      {"package io.aeron.samples.cluster.rig;", `"io.aeron.samples.cluster.EchoService"`, "setAccessible(true)"},
		src + "Codec.java":     {"implements RigCodec", "encodeOrder", "ingressCorrelationId", "decodeEgress", "TODO"},
		"playbook.yaml":        {"name: echo\n", "target/echo.jar", "{{.ConfigFile}}"},
		"start-node.sh":        nil,
		"node.properties.tmpl": nil,
	} {
		got := read(name)
		for _, w := range wants {
			if !strings.Contains(got, w) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
	}
	for _, name := range []string{"start-node.sh", "node.properties.tmpl"} {
		orig, err := os.ReadFile(filepath.Join("../../examples/aeron-cluster", name))
		if err != nil {
			t.Fatal(err)
		}
		if read(name) != string(orig) {
			t.Errorf("%s differs from examples/aeron-cluster/%s", name, name)
		}
	}
	if fi, err := os.Stat(filepath.Join(mod, "start-node.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("start-node.sh is not executable: %v %v", fi.Mode(), err)
	}
	// Nothing of the temporary folder is left beside the module.
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("want only echo/ in %s, got %d entries", dir, len(entries))
	}
}

// TestNewAeronServiceBadInput: each bad input exits 2 naming the flag and what is valid, and
// writes nothing; an existing non-empty folder is never written into, an empty one is used.
func TestNewAeronServiceBadInput(t *testing.T) {
	dir := t.TempDir()
	taken := filepath.Join(dir, "taken")
	if err := os.MkdirAll(taken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(taken, "mine.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	svc := "io.aeron.samples.cluster.EchoService"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"new", "aeron-service", "../up", "--service", svc}, []string{"NAME", "want a letter or digit"}},
		{[]string{"new", "aeron-service", "-x", "--service", svc}, []string{"unknown shorthand flag"}},
		{[]string{"new", "aeron-service", ".hidden", "--service", svc}, []string{"NAME", "no leading '.'"}},
		{[]string{"new", "aeron-service", strings.Repeat("a", 65), "--service", svc}, []string{"NAME is 65 bytes long, at most 64"}},
		{[]string{"new", "aeron-service", "ok"}, []string{"--service is required"}},
		{[]string{"new", "aeron-service", "ok", "--service", "io.aeron.Echo Service"}, []string{"--service", "dotted Java name"}},
		{[]string{"new", "aeron-service", "ok", "--service", "x\";System.exit(1);\""}, []string{"--service", "dotted Java name"}},
		{[]string{"new", "aeron-service", "ok", "--service", svc, "--package", "com.new.rig"}, []string{"--package", `"new" is a Java keyword`}},
		{[]string{"new", "aeron-service", "ok", "--service", svc, "--dir", filepath.Join(dir, "none")}, []string{"--dir", "not a folder"}},
		{[]string{"new", "aeron-service", "taken", "--service", svc}, []string{"taken exists and is not empty", "nothing is overwritten"}},
		{[]string{"new", "aeron-service", "a", "b", "--service", svc}, []string{"one NAME", "got 2"}},
		{[]string{"new", "aeron-servic", "x"}, []string{"kind: aeron-service"}},
	} {
		args := c.args
		if args[1] == "aeron-service" && !strings.Contains(strings.Join(args, " "), "--dir") {
			args = append(args, "--dir", dir)
		}
		_, _, err := runRig(t, args...)
		if !errors.Is(err, errUsage) {
			t.Errorf("rig %s: err = %v, want a usage error (exit 2)", strings.Join(c.args, " "), err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("rig %s: %v, want it to say %q", strings.Join(c.args, " "), err, w)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("bad input created something: %d entries in %s", len(entries), dir)
	}
	if b, _ := os.ReadFile(filepath.Join(taken, "mine.txt")); string(b) != "keep" {
		t.Errorf("the taken folder was changed")
	}
	if files, _ := os.ReadDir(taken); len(files) != 1 {
		t.Errorf("files were written into the taken folder: %d entries", len(files))
	}
	// An empty folder of that name is taken over.
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runRig(t, "new", "aeron-service", "empty", "--service", svc, "--dir", dir); err != nil {
		t.Fatalf("into an empty folder: %v\n%s", err, errOut)
	}
	if _, err := os.Stat(filepath.Join(empty, "pom.xml")); err != nil {
		t.Errorf("the empty folder did not get the module: %v", err)
	}
}
