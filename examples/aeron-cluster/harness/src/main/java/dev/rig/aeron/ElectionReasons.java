package dev.rig.aeron;

import io.aeron.cluster.ConsensusModule;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.errors.ErrorLogReader;

/**
 * Aeron's own reason for each election, as the consensus module records it (a ClusterEvent in its
 * mark file's error log, what ClusterTool's errors command prints: "log disconnected from leader:
 * eos=true", "log recording stopped: eos=true", "leader heartbeat timeout"), written to engine.log
 * when the node enters an election: so whether followers left their leader at its end-of-stream
 * or after the heartbeat timeout is in each node's log, from Aeron's record.
 */
final class ElectionReasons
{
    private final AtomicBuffer errors;
    private final Map<String, Long> seen = new HashMap<>(); // observation text -> last observation (ms) logged

    ElectionReasons(final ConsensusModule.Context cm)
    {
        this.errors = cm.clusterMarkFile().errorBuffer();
    }

    /** Logs the cluster events observed since the last call (newest observation of each). */
    void report()
    {
        ErrorLogReader.read(errors, (count, first, last, text) ->
        {
            final int nl = text.indexOf('\n');
            final String line = nl < 0 ? text : text.substring(0, nl);
            if (!line.contains("ClusterEvent"))
            {
                return;
            }
            final Long was = seen.put(line, last);
            if (was == null || was < last)
            {
                Log.info("election reason (Aeron's error log, ClusterTool errors) at " + Instant.ofEpochMilli(last) + ": " +
                    line.substring(line.indexOf("ClusterEvent") + "ClusterEvent".length()).replaceFirst("^:\\s*", "") +
                    " (" + count + (count == 1 ? " time" : " times") + " since launch)");
            }
        });
    }
}
