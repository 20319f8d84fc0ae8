// Package aeroncluster holds the files of the Aeron Cluster example that `rig new aeron-service`
// writes into a user's module (package scaffold): the start script and node template as they
// are here, the parent pom's coordinates, and the scaffold's own templates. Embedding them from
// this folder keeps one copy of each in the repository.
package aeroncluster

import "embed"

// Files are start-node.sh, node.properties.tmpl, pom.xml (the rig-aeron parent) and scaffold/.
//
//go:embed start-node.sh node.properties.tmpl pom.xml scaffold
var Files embed.FS
