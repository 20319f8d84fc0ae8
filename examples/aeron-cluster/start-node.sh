#!/usr/bin/env bash
# Starts one Aeron Cluster node for rig's command driver: a module of this folder built with
# rig-aeron (matching by default; --module auction for Aeron's tutorial service) or any jar built
# the same way (--jar PATH: its manifest names the main class and its lib/; a relative PATH is
# taken from this script's folder, as the node's working folder is rig's). Arguments that start
# with -D or -X go to the JVM, the rest to the node; the JVM replaces this shell (exec), so the pid
# the agent started is the JVM's and /proc/PID/cmdline shows every setting as rendered.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ ${1:-} == --book ]]; then # engine.book_capture: a stored book's capture (book.sh)
	shift
	exec "$here/book.sh" "$@"
fi
module=matching
jar=""
jvm=()
app=()
while (($#)); do
	case $1 in
	--module)
		module="${2:?start-node.sh: --module needs a name (matching, auction)}"
		shift 2
		continue
		;;
	--jar)
		jar="${2:?start-node.sh: --jar needs a path}"
		shift 2
		continue
		;;
	-D* | -X*) jvm+=("$1") ;;
	*) app+=("$1") ;;
	esac
	shift
done
if [[ -z $jar ]]; then
	if [[ ! -d $here/$module ]]; then
		echo "start-node.sh: no module $module in $here (want matching or auction, or --jar PATH)" >&2
		exit 2
	fi
	jar="$here/$module/target/$module.jar"
elif [[ $jar != /* ]]; then
	jar="$here/$jar"
fi
if [[ ! -f $jar || ! -d $(dirname "$jar")/lib ]]; then
	echo "start-node.sh: $jar is not built; build it with: mvn -q -B -f $here/pom.xml package" >&2
	exit 2
fi
java="${JAVA:-java}"
if ! command -v "$java" >/dev/null; then
	echo "start-node.sh: no $java in PATH; the engine needs a Java 17+ JDK (set JAVA to its java)" >&2
	exit 2
fi
# Agrona and Aeron reach into these JDK internals (as aeron-io's own launch scripts allow).
exec "$java" --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED \
	--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED \
	"${jvm[@]}" -jar "$jar" "${app[@]}"
