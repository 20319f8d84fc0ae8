#!/usr/bin/env bash
# Starts one Aeron Cluster node (dev.rig.aeron.Node) for rig's command driver. Arguments that
# start with -D or -X go to the JVM, the rest to the node; the JVM replaces this shell (exec), so
# the pid the agent started is the JVM's and /proc/PID/cmdline shows every setting as rendered.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar="$here/target/rig-aeron-cluster.jar"
if [[ ! -f $jar || ! -d $here/target/lib ]]; then
	echo "start-node.sh: $jar is not built; build it with: mvn -q -B -f $here/pom.xml package" >&2
	exit 2
fi
java="${JAVA:-java}"
if ! command -v "$java" >/dev/null; then
	echo "start-node.sh: no $java in PATH; the engine needs a Java 17+ JDK (set JAVA to its java)" >&2
	exit 2
fi
jvm=()
app=()
for a in "$@"; do
	case $a in
	-D* | -X*) jvm+=("$a") ;;
	*) app+=("$a") ;;
	esac
done
# Agrona and Aeron reach into these JDK internals (as aeron-io's own launch scripts allow).
exec "$java" --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED \
	--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED \
	"${jvm[@]}" -cp "$jar:$here/target/lib/*" dev.rig.aeron.Node "${app[@]}"
