package spec

import "strings"

// NodePackage is a distribution package that cloud-init installs on every node of a stack, with
// the command whose presence on the node's PATH shows it was installed.
type NodePackage struct {
	Name    string // the package's name, the same in al2023's dnf and Ubuntu's apt
	Command string
	Why     string
}

// NodePackages is the one list of them: infra/cluster's user data installs it
// (CloudInitPackages) and `rig up` checks it on every node once cloud-init has finished
// (infra/ready), so a node whose package step failed is named before a run needs the package.
var NodePackages = []NodePackage{
	{Name: "fio", Command: "fio", Why: "measures each data volume against what was provisioned before a run (agent/disk.Check)"},
}

// CloudInitPackages is the cloud-config package step for NodePackages. Its text is part of every
// instance's user data, and a change to user data replaces the instances: keep it stable.
func CloudInitPackages() string {
	var b strings.Builder
	b.WriteString("package_update: true\npackages:\n")
	for _, p := range NodePackages {
		b.WriteString("  - " + p.Name + "\n")
	}
	return b.String()
}
