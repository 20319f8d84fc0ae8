// Package tools is the one list of programs rig and its tests run on this machine, each with the
// Debian package that installs it, and the tests' way to ask for one: Require skips a test
// where the program is missing, except under CI=true, where it fails naming the package (CI
// installs every one of them, so a missing one there is a broken pipeline, not an excuse).
//
// README.md's test command installs every package this table names that Debian does not mark
// Essential, and .ci/run installs the same list; TestInstallLineCoversEveryTool holds the
// table, the code's exec sites and those two files together.
package tools

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"testing"
)

// Tool is a program (or a file a test reads) that a package installs.
type Tool struct {
	Package string // the Debian package that installs it
	// Path is where it is looked for when not in PATH: a program Debian keeps in /usr/sbin
	// (not in a non-root user's PATH) or a file.
	Path string
	// By names what runs it where no Go code does (a shell script), which the check of the
	// Go code's exec sites cannot see.
	By string
}

// Table is every program the code or its tests run, by the name they run it by. Programs
// the code runs on a node over SSH are here too: the tests' nodes are this machine.
var Table = map[string]Tool{
	// Essential packages (every Debian system has them): listed so that the check knows them.
	"sh":         {Package: "dash"},
	"bash":       {Package: "bash", By: "examples/aeron-cluster/start-node.sh"},
	"cat":        {Package: "coreutils"},
	"echo":       {Package: "coreutils"},
	"env":        {Package: "coreutils", By: "transport/sshx's CommandLine (sudo -n -- env K=V ...)"},
	"mkdir":      {Package: "coreutils", By: "target/ssh/stage.go's shell lines"},
	"nohup":      {Package: "coreutils", By: "target/ssh/stage.go's shell lines"},
	"nproc":      {Package: "coreutils"},
	"printf":     {Package: "coreutils"},
	"pwd":        {Package: "coreutils"},
	"rm":         {Package: "coreutils"},
	"sha256sum":  {Package: "coreutils"},
	"sleep":      {Package: "coreutils"},
	"sync":       {Package: "coreutils"},
	"tail":       {Package: "coreutils"},
	"test":       {Package: "coreutils"},
	"touch":      {Package: "coreutils"},
	"true":       {Package: "coreutils"},
	"uname":      {Package: "coreutils"},
	"blkid":      {Package: "util-linux"},
	"findmnt":    {Package: "util-linux"},
	"setsid":     {Package: "util-linux", By: "target/ssh/stage.go's shell lines"},
	"runuser":    {Package: "util-linux", By: "examples/aeron-cluster/auth_test.go (a foreign client as nobody)"},
	"dpkg-query": {Package: "dpkg", By: "internal/tools's TestEssentialPackages"},

	// Installed by README.md's test command and .ci/run.
	"mount":     {Package: "mount"},
	"umount":    {Package: "mount"},
	"losetup":   {Package: "mount"},
	"mkfs.ext4": {Package: "e2fsprogs"},
	"mkfs.xfs":  {Package: "xfsprogs"},
	"kill":      {Package: "procps"},
	"sysctl":    {Package: "procps"},
	"fio":       {Package: "fio"},
	"iostat":    {Package: "sysstat"},
	"ethtool":   {Package: "ethtool"},
	// transport/sshx runs a command through sudo -n when the login user is not root (the
	// tests run as root, so only a node that logs in as another user needs it).
	"sudo":       {Package: "sudo", By: "transport/sshx's CommandLine"},
	"ssh":        {Package: "openssh-client"},
	"ssh-keygen": {Package: "openssh-client"},
	"sshd":       {Package: "openssh-server", Path: "/usr/sbin/sshd"},
	"python3":    {Package: "python3"},
	// Python's venv module (with ensurepip), which Debian splits out of python3.
	"venv": {Package: "python3-venv", By: ".ci/moto (python3 -m venv)"},
	"java": {Package: "openjdk-17-jdk-headless", By: "examples/aeron-cluster/start-node.sh"},
	"mvn":  {Package: "maven", By: ".ci/run (mvn dependency:go-offline)"},
	// The JDK's compiler, which Maven runs to build examples/aeron-cluster.
	"javac": {Package: "openjdk-17-jdk-headless", By: "mvn (examples/aeron-cluster's build)"},
	// Java Flight Recorder's tools: the agent reads a JVM engine's recording with jfr
	// (recording/jfr.go); jcmd only in recording's tests, which check that the commands the agent
	// sends through the JVM's attach socket (recording/attach.go) are answered as jcmd's are.
	"jcmd": {Package: "openjdk-17-jdk-headless"},
	"jfr":  {Package: "openjdk-17-jdk-headless"},
	// HdrHistogram's own log processor, run with java to read the load generator's .hlog files.
	"hdrhistogram.jar": {Package: "libhdrhistogram-java", Path: "/usr/share/java/hdrhistogram.jar"},
}

// Essential are the packages of Table that Debian marks Essential: installed everywhere, so
// the install line need not name them (TestEssentialPackages checks the mark where dpkg is).
var Essential = []string{"bash", "coreutils", "dash", "dpkg", "util-linux"}

// NotFromApt are programs the code runs that no Debian package of the install line provides,
// with where they come from instead.
var NotFromApt = map[string]string{
	"go":          "the Go toolchain the test command itself runs (go.mod's version)",
	"pulumi":      "Pulumi's CLI, for rig up/down (docs/infra.md); the driver's tests use a fake, and infra/realpulumi's optional check the CLI its run.sh builds",
	"moto_server": ".ci/moto installs it into a venv (infra/awsemu)",
}

// Packages is every package Table names that the install line must name (all but Essential),
// sorted.
func Packages() []string {
	seen := map[string]bool{}
	for _, t := range Table {
		if !slices.Contains(Essential, t.Package) {
			seen[t.Package] = true
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Lookup is where name is on this machine, or an error naming the package that installs it.
// name must be in Table.
func Lookup(name string) (string, error) {
	tool, ok := Table[name]
	if !ok {
		return "", fmt.Errorf("tools: %q is not in tools.Table: add it with the Debian package that installs it", name)
	}
	if tool.Path != "" {
		if _, err := os.Stat(tool.Path); err == nil {
			return tool.Path, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	where := "in PATH"
	if tool.Path != "" {
		where = "at " + tool.Path + " or in PATH"
	}
	return "", fmt.Errorf("%s is not installed (not %s): apt-get install %s", name, where, tool.Package)
}

// Require is where name is; where it is missing the test is skipped, or under CI=true fails,
// naming the package that installs it.
func Require(t testing.TB, name string) string {
	t.Helper()
	p, err := Lookup(name)
	if err != nil {
		if _, known := Table[name]; !known {
			t.Fatal(err)
		}
		SkipOrFail(t, "%v", err)
	}
	return p
}

// SkipOrFail skips the test with the reason, or fails it when CI=true: a prerequisite CI
// installs that is missing there is a broken pipeline.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: .ci/run and README.md's test command install it)", msg)
	}
	t.Skip(msg)
}
