package dev.rig.aeron;

import io.aeron.AeronCounters;
import io.aeron.cluster.ElectionState;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersManager;

/**
 * Checks of the harness that need no cluster, run by examples/aeron-cluster/aeron_test.go
 * (java -cp ... dev.rig.aeron.HarnessSelfTest): the Aeron version check at start and the phases
 * read from Aeron's election states. Prints one line per check and exits 1 if any failed.
 */
public final class HarnessSelfTest
{
    private static int failed;

    private HarnessSelfTest()
    {
    }

    private static void check(final String name, final boolean ok, final String seen)
    {
        System.out.println((ok ? "pass " : "FAIL ") + name + ": " + seen);
        if (!ok)
        {
            failed++;
        }
    }

    /** A counters file with the given type ids allocated for cluster 0 (the key's first int is the cluster id, as Aeron's). */
    private static CountersManager counters(final int... typeIds)
    {
        final CountersManager cm = new CountersManager(new UnsafeBuffer(ByteBuffer.allocateDirect(64 * 1024)),
            new UnsafeBuffer(ByteBuffer.allocateDirect(8 * 1024)));
        final UnsafeBuffer key = new UnsafeBuffer(new byte[4]);
        for (final int t : typeIds)
        {
            key.putInt(0, 0);
            cm.allocate(t, key, 0, 4, new UnsafeBuffer("x".getBytes()), 0, 1);
        }
        return cm;
    }

    public static void main(final String[] args) throws Exception
    {
        String err = null;
        try
        {
            RigAeron.checkCounters(counters(AeronCounters.CLUSTER_NODE_ROLE_TYPE_ID, AeronCounters.CLUSTER_COMMIT_POSITION_TYPE_ID), 0, 0);
        }
        catch (final IllegalStateException e)
        {
            err = e.getMessage();
        }
        check("a missing counter fails the start naming the Aeron version and the counter",
            err != null && err.startsWith("Aeron " + Admin.AERON_VERSION + ": no counter for election state (type " +
            AeronCounters.CLUSTER_ELECTION_STATE_TYPE_ID + ")") && err.contains("built against Aeron"), String.valueOf(err));
        err = null;
        try
        {
            RigAeron.checkCounters(counters(RigAeron.EXPECTED_COUNTERS), 0, 0);
        }
        catch (final IllegalStateException e)
        {
            err = e.getMessage();
        }
        check("every expected counter present: the start goes on", err == null, String.valueOf(err));

        final String[] phases = {"starting", "restoring", "joining", "replaying", "catching-up", "ready"};
        final StringBuilder seen = new StringBuilder();
        boolean ok = true;
        for (final ElectionState s : ElectionState.values())
        {
            final String want = switch (s)
            {
                case CLOSED -> "ready";
                case LEADER_REPLAY, FOLLOWER_REPLAY -> "replaying";
                case LEADER_INIT, LEADER_READY, FOLLOWER_CATCHUP_INIT, FOLLOWER_CATCHUP_AWAIT, FOLLOWER_CATCHUP, FOLLOWER_LOG_INIT,
                    FOLLOWER_LOG_AWAIT, FOLLOWER_READY -> "catching-up";
                default -> "joining";
            };
            final String got = phases[Admin.phase(ElectionState.get(s.code()), 0)];
            ok &= got.equals(want);
            seen.append(s).append('=').append(got).append(' ');
        }
        check("election states read by their code through Aeron's enum give the contract's phases", ok, seen.toString().trim());
        check("a candidate in CLOSED is not ready", phases[Admin.phase(ElectionState.CLOSED, 1)].equals("joining"),
            phases[Admin.phase(ElectionState.CLOSED, 1)]);

        System.out.println(failed == 0 ? "ok" : failed + " check(s) failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
