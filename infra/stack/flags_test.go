package stack

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/pflag"
)

// What rig passes on to the stack driver parses back, on the driver's side of the same
// declarations, to what rig was given.
func TestFlagsPassOn(t *testing.T) {
	rig := pflag.NewFlagSet("rig", pflag.ContinueOnError)
	var d DriverFlags
	var n NodeFlags
	d.Register(rig)
	n.Register(rig, false)
	if err := rig.Parse([]string{"-v", "--backend", "s3://b/p", "--secrets-provider", "passphrase",
		"--ssh-key", "k1", "--ssh-key", "/abs/k2", "--sudo", "--remote-dir", "/opt/r", "--data-mount", "/mnt"}); err != nil {
		t.Fatal(err)
	}
	if rig.Lookup("rig-binary") != nil {
		t.Error("rig declares --rig-binary: it passes its own")
	}
	drv := pflag.NewFlagSet("rig-stack", pflag.ContinueOnError)
	var d2 DriverFlags
	var n2 NodeFlags
	d2.Register(drv)
	n2.Register(drv, true)
	if err := drv.Parse(append(d.Args(), n.Args()...)); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("k1")
	n.KeyFiles[0], n2.Rig = abs, ""
	d2.ProjectDir = d.ProjectDir
	if !reflect.DeepEqual(d, d2) || !reflect.DeepEqual(n, n2) {
		t.Errorf("passed on: %+v %+v; given %+v %+v", d2, n2, d, n)
	}
	if (&NodeFlags{DataMount: "/data"}).Args() != nil {
		t.Error("without an SSH key nothing is passed on")
	}
}
