package fusefs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"golang.org/x/sys/unix"
)

// deadHolderEnv makes TestHelperDeadHolder, run in a child process, mount a model on the
// mountpoint it names and wait to be killed.
const deadHolderEnv = "RIG_FUSEFS_DEAD_HOLDER"

func TestHelperDeadHolder(t *testing.T) {
	spec := os.Getenv(deadHolderEnv)
	if spec == "" {
		t.Skip("run by mountDeadHolder in a child process")
	}
	backing, mp, _ := strings.Cut(spec, "\n")
	if _, err := Mount(context.Background(), Options{Backing: backing, Mountpoint: mp, Owner: "run dead-one"}); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("mounted")
	time.Sleep(time.Minute)
	os.Exit(1)
}

// mountDeadHolder mounts a model on mp from a child process and SIGKILLs it, as a killed
// controller leaves its models: mounted, dead (ENOTCONN), their lock free. It returns the pid.
func mountDeadHolder(t *testing.T, mp string) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE directly (mount(2)) needs root")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDeadHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), deadHolderEnv+"="+t.TempDir()+"\n"+mp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); unix.Unmount(mp, unix.MNT_DETACH) })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); l == "mounted" || strings.HasPrefix(l, "error:") {
				line <- l
				return
			}
		}
		line <- "exited"
	}()
	select {
	case l := <-line:
		if l != "mounted" {
			t.Fatalf("child mount: %s", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child did not mount within 30s")
	}
	cmd.Process.Kill()
	cmd.Wait()
	var st unix.Stat_t
	if err := unix.Stat(mp, &st); !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("stat %s after its holder was killed: %v; want ENOTCONN (a dead mount)", mp, err)
	}
	return cmd.Process.Pid
}

// A model on a mountpoint another live model holds is refused naming the holder, and the live
// one keeps serving; once it is unmounted the mountpoint is free.
func TestSecondModelOnAMountpointRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE directly (mount(2)) needs root")
	}
	mp := filepath.Join(t.TempDir(), "disk")
	a, err := Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: mp, Owner: "run first"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: mp, Owner: "run second"})
	if err == nil {
		b.Close()
		t.Fatal("a second model mounted on a live one's mountpoint")
	}
	want := fmt.Sprintf("held by a live disk model: run first (pid %d)", os.Getpid())
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second mount: %v; want ErrBusy naming %q", err, want)
	}
	if err := os.WriteFile(filepath.Join(mp, "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("the first model after the refusal: %v", err)
	}
	select {
	case <-a.Lost():
		t.Fatalf("the first model was lost: %v", a.Err())
	default:
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: mp, Owner: "run second"})
	if err != nil {
		t.Fatalf("mount once the first is gone: %v", err)
	}
	if len(b.Reclaimed()) != 0 {
		t.Errorf("a cleanly unmounted model left %v", b.Reclaimed())
	}
	b.Close()
}

// The next model on a dead holder's mountpoint detaches its dead mount first and names it.
func TestMountReclaimsADeadHoldersMount(t *testing.T) {
	mp := filepath.Join(t.TempDir(), "disk")
	pid := mountDeadHolder(t, mp)
	d, err := Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: mp, Owner: "run next"})
	if err != nil {
		t.Fatalf("mount over a dead model: %v", err)
	}
	defer d.Close()
	want := Leftover{Mountpoint: mp, LeftBy: Holder{Owner: "run dead-one", PID: pid}}
	if got := d.Reclaimed(); len(got) != 1 || got[0] != want {
		t.Errorf("reclaimed %v, want %v", got, want)
	}
	if err := os.WriteFile(filepath.Join(mp, "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("the new model: %v", err)
	}
	all, _ := mountinfo()
	if on := mountsOn(all, mp); len(on) != 1 {
		t.Errorf("mounts on %s: %+v; want only the new model", mp, on)
	}
}

// Reclaim detaches the dead models it is asked about, names who left them, and leaves live
// models (their lock held) and unasked ones alone.
func TestReclaimDetachesOnlyDeadModels(t *testing.T) {
	dir := t.TempDir()
	dead, other := filepath.Join(dir, "node-0", "disk"), filepath.Join(dir, "elsewhere", "disk")
	pid := mountDeadHolder(t, dead)
	mountDeadHolder(t, other)
	live, err := Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: filepath.Join(dir, "node-1", "disk"), Owner: "run live"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	under := func(mp string, _ Holder) bool { return strings.HasPrefix(mp, filepath.Join(dir, "node-")) }
	detached, held, err := Reclaim(under)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Leftover{Mountpoint: dead, LeftBy: Holder{Owner: "run dead-one", PID: pid}}); len(detached) != 1 || detached[0] != want {
		t.Errorf("detached %v, want %v", detached, want)
	}
	if len(held) != 1 || held[0].Mountpoint != live.Dir() || held[0].LeftBy != (Holder{Owner: "run live", PID: os.Getpid()}) {
		t.Errorf("held %v, want the live model named", held)
	}
	all, _ := mountinfo()
	if len(mountsOn(all, dead)) != 0 || len(mountsOn(all, other)) != 1 || len(mountsOn(all, live.Dir())) != 1 {
		t.Errorf("after Reclaim: dead %v, unasked %v, live %v; want none, one, one", mountsOn(all, dead), mountsOn(all, other), mountsOn(all, live.Dir()))
	}
	if err := os.WriteFile(filepath.Join(live.Dir(), "f"), []byte("x"), 0o644); err != nil {
		t.Errorf("the live model after Reclaim: %v", err)
	}
}

// A mountpoint something else is mounted on is refused, named, and left as it was.
func TestMountRefusesAForeignMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	mp := t.TempDir()
	if err := unix.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mp, unix.MNT_DETACH) })
	d, err := Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: mp})
	if err == nil {
		d.Close()
		t.Fatal("a model mounted over a tmpfs")
	}
	if !strings.Contains(err.Error(), "already mounted (tmpfs from tmpfs), not by a disk model") {
		t.Errorf("refusal %q does not name the mount", err)
	}
	all, _ := mountinfo()
	if on := mountsOn(all, mp); len(on) != 1 || on[0].fstype != "tmpfs" {
		t.Errorf("mounts on %s after the refusal: %+v", mp, on)
	}
}

// A model unmounted under its holder (a lazy unmount while a file is open: its server keeps
// running) or covered by another mount is noticed as lost, and Close does not unmount what
// covers it.
func TestLostModelNoticed(t *testing.T) {
	for _, how := range []string{"detached", "unmounted", "covered"} {
		t.Run(how, func(t *testing.T) {
			if os.Geteuid() != 0 {
				t.Skip("mounting FUSE directly (mount(2)) needs root")
			}
			d, err := Mount(context.Background(), Options{Backing: t.TempDir(), Mountpoint: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			f, err := os.Create(filepath.Join(d.Dir(), "open"))
			if err != nil {
				t.Fatal(err)
			}
			switch how {
			case "detached":
				defer f.Close()
				err = unix.Unmount(d.Dir(), unix.MNT_DETACH)
			case "unmounted":
				f.Close()
				err = unix.Unmount(d.Dir(), 0)
			case "covered":
				defer f.Close()
				err = unix.Mount("tmpfs", d.Dir(), "tmpfs", 0, "size=1m")
				defer unix.Unmount(d.Dir(), unix.MNT_DETACH)
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-d.Lost():
			case <-time.After(10 * healthEvery):
				t.Fatalf("not noticed within %s", 10*healthEvery)
			}
			if err := d.Err(); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), d.Dir()) {
				t.Errorf("Err() = %v; want ErrLost naming the mountpoint", err)
			}
			t.Logf("%v", d.Err())
			if how == "covered" {
				if err := d.Close(); err == nil || !strings.Contains(err.Error(), "covers it") {
					t.Errorf("Close of a covered model: %v", err)
				}
				all, _ := mountinfo()
				if on := mountsOn(all, d.Dir()); len(on) != 2 || on[1].fstype != "tmpfs" {
					t.Errorf("after Close: %+v; want the model and the tmpfs over it, untouched", on)
				}
				unix.Unmount(d.Dir(), unix.MNT_DETACH) // the tmpfs, then the model below
				unix.Unmount(d.Dir(), unix.MNT_DETACH)
			}
			if mounted(d.Dir()) {
				t.Errorf("%s still mounted", d.Dir())
			}
		})
	}
}

// A clean Close is not a loss.
func TestCloseIsNotALoss(t *testing.T) {
	d, _ := mountT(t, diskmodel.Limits{})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * healthEvery)
	if err := d.Err(); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/x\134y`: `/x\y`, `/plain`: "/plain", `/end\04`: `/end\04`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// The top of a stack of mounts on one folder is the one no other there is stacked on, whatever
// order they are listed in.
func TestMountsOnFindsTheTop(t *testing.T) {
	all := []mountEntry{
		{id: 40, parent: 30, mountpoint: "/m", fstype: "tmpfs"},
		{id: 30, parent: 1, mountpoint: "/m", fstype: FsType},
		{id: 50, parent: 40, mountpoint: "/m", fstype: FsType},
		{id: 31, parent: 1, mountpoint: "/other"},
	}
	on := mountsOn(all, "/m")
	if len(on) != 3 || on[0].id != 30 || on[1].id != 40 || on[2].id != 50 {
		t.Errorf("mountsOn = %+v; want ids 30, 40, 50", on)
	}
}
