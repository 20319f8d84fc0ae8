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

        check("a follower that left CLOSED to canvass is a candidate (the failover's detection)",
            Admin.role(0, ElectionState.CANVASS).equals("candidate") && Admin.role(0, ElectionState.NOMINATE).equals("candidate") &&
            Admin.role(1, ElectionState.CANDIDATE_BALLOT).equals("candidate") && Admin.role(0, ElectionState.FOLLOWER_BALLOT).equals("follower") &&
            Admin.role(0, ElectionState.CLOSED).equals("follower") && Admin.role(2, ElectionState.LEADER_REPLAY).equals("leader"),
            Admin.role(0, ElectionState.CANVASS) + " " + Admin.role(0, ElectionState.FOLLOWER_BALLOT) + " " + Admin.role(2, ElectionState.LEADER_REPLAY));

        long[] durs = {Changes.parseGoDuration("10s"), Changes.parseGoDuration("1m0s"), Changes.parseGoDuration("1.5s"),
            Changes.parseGoDuration("250ms"), Changes.parseGoDuration("0"), Changes.parseGoDuration("20µs")};
        check("GET /changes reads wait as a Go duration", java.util.Arrays.equals(durs,
            new long[] {10_000_000_000L, 60_000_000_000L, 1_500_000_000L, 250_000_000L, 0, 20_000}), java.util.Arrays.toString(durs));
        int refused = 0;
        for (final String bad : new String[] {"", "10", "-1s", "1x", "s"})
        {
            try
            {
                Changes.parseGoDuration(bad);
            }
            catch (final IllegalArgumentException e)
            {
                refused++;
            }
        }
        check("GET /changes refuses a wait that is no Go duration", refused == 5, refused + " of 5 refused");

        final Changes ch = new Changes();
        final java.time.Instant t0 = java.time.Instant.parse("2026-12-06T00:00:00Z");
        ch.check("follower", t0, () -> "{\"role\":\"follower\"}");
        ch.check("follower", t0.plusMillis(1), () -> "{}");
        ch.check("candidate", t0.plusMillis(2), () -> "{\"role\":\"candidate\"}");
        ch.check("leader", t0.plusMillis(3), () -> "{\"role\":\"leader\"}");
        final String all = ch.since(0, 0);
        final String after2 = ch.since(2, 0);
        final String stale = ch.since(99, 0);
        final long w0 = System.nanoTime();
        final String none = ch.since(3, 20_000_000L);
        final long waited = System.nanoTime() - w0;
        check("GET /changes: a version per change, each with the check before it, oldest first",
            all.startsWith("{\"version\":3,\"changes\":[{\"version\":1,\"status\":{\"role\":\"follower\"}},{\"version\":2,\"prev_check\":\"2026-12-06T00:00:00.001Z\"") &&
            all.endsWith("\"truncated\":false}") && after2.contains("\"version\":3,\"prev_check\":\"2026-12-06T00:00:00.002Z\"") &&
            !after2.contains("\"version\":2,") && stale.equals(all) && none.contains("\"changes\":[]") && waited >= 19_000_000L,
            all + " | " + after2 + " | " + none + " after " + waited / 1_000_000 + " ms");

        System.out.println(failed == 0 ? "ok" : failed + " check(s) failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
