#!/usr/bin/env bash
# rig's stored-book capture for the Aeron engine (engine.book_capture: start-node.sh --book runs
# this; docs/engines.md, "A stored book for Aeron").
#   book.sh version            prints the Aeron version the engine runs (aeron-all in lib/)
#   book.sh capture DATA OUT   turns a copy of a stopped node's DATA/aeron-cluster into a cluster
#                              that starts from its latest snapshot at log position 0, writes the
#                              files that make it under OUT (at their paths relative to DATA) and
#                              prints those paths, one a line
# The copy is seeded with ClusterTool (the recording log names only the latest snapshot), every
# other recording (the log, older snapshots) is marked invalid and compacted away with ArchiveTool,
# and the snapshot segments are cut to their stop position rounded up to 4 KiB: what is left
# restores on every member of a fresh cluster. DATA itself is never written.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="$here/matching/target/lib"
jars=("$lib"/aeron-all-*.jar)
if [[ ! -f ${jars[0]} ]]; then
	echo "book.sh: no aeron-all jar in $lib; build it with: mvn -q -B -f $here/pom.xml package" >&2
	exit 2
fi
aeron_jar=${jars[0]}
version=$(basename "$aeron_jar" .jar)
version=${version#aeron-all-}
java="${JAVA:-java}"
tool() {
	"$java" --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
		-cp "$aeron_jar" "$@"
}

case ${1:-} in
version)
	echo "$version"
	;;
capture)
	data="${2:?book.sh capture: want DATA OUT}"
	out="${3:?book.sh capture: want DATA OUT}"
	src="$data/aeron-cluster"
	if [[ ! -f $src/cluster/recording.log ]]; then
		echo "book.sh: no $src/cluster/recording.log: not a stopped Aeron node's data folder" >&2
		exit 2
	fi
	rm -rf "$out"
	mkdir -p "$out/aeron-cluster"
	work="$out/.work"
	cp -a "$src" "$work"
	# Stop positions are read before compacting: describe-all needs the archive's mark file.
	tool io.aeron.cluster.ClusterTool "$work/cluster" seed-recording-log-from-snapshot >&2
	keep=$(tool io.aeron.cluster.ClusterTool "$work/cluster" recording-log |
		grep -o 'recordingId=[0-9]*, [^}]*type=SNAPSHOT' | sed 's/recordingId=\([0-9]*\),.*/\1/' | sort -u)
	if [[ -z $keep ]]; then
		echo "book.sh: $src holds no snapshot to capture (the run must take one after its preload)" >&2
		exit 3
	fi
	declare -A stop=()
	while IFS=' ' read -r id pos; do
		stop[$id]=$pos
	done < <(tool io.aeron.archive.ArchiveTool "$work/archive" describe-all |
		sed -n 's/.*|recordingId=\([0-9]*\)|.*|stopPosition=\([0-9]*\)|.*/\1 \2/p')
	for id in "${!stop[@]}"; do
		if ! grep -qx "$id" <<<"$keep"; then
			tool io.aeron.archive.ArchiveTool "$work/archive" mark-invalid "$id" >&2
		fi
	done
	echo y | tool io.aeron.archive.ArchiveTool "$work/archive" compact >&2
	mkdir -p "$out/aeron-cluster/cluster" "$out/aeron-cluster/archive"
	cp "$work/cluster/recording.log" "$out/aeron-cluster/cluster/"
	cp "$work/archive/archive.catalog" "$out/aeron-cluster/archive/"
	echo aeron-cluster/cluster/recording.log
	echo aeron-cluster/archive/archive.catalog
	for id in $keep; do
		pos=${stop[$id]:?book.sh: snapshot recording $id is not in the archive catalog}
		for seg in "$work/archive/$id"-*.rec; do
			name=$(basename "$seg")
			base=${name#"$id"-}
			base=${base%.rec}
			cp --sparse=always "$seg" "$out/aeron-cluster/archive/$name"
			# A segment's bytes past the recording's stop position are zeros nothing reads.
			if ((pos - base < $(stat -c %s "$seg"))); then
				truncate -s $((((pos - base) + 4095) / 4096 * 4096)) "$out/aeron-cluster/archive/$name"
			fi
			echo "aeron-cluster/archive/$name"
		done
	done
	rm -rf "$work"
	;;
*)
	echo "book.sh: want 'version' or 'capture DATA OUT'" >&2
	exit 2
	;;
esac
