package dev.rig.aeron;

import io.aeron.AeronCounters;
import io.aeron.cluster.ElectionState;
import io.aeron.security.Authenticator;
import io.aeron.security.SessionProxy;
import java.nio.ByteBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersManager;

/**
 * Checks of the harness that need no cluster, run by examples/aeron-cluster/aeron_test.go
 * (java -cp ... dev.rig.aeron.HarnessSelfTest): the Aeron version check at start, the phases
 * read from Aeron's election states, a snapshot's Archive writes from the recorder's counters and
 * the preload's receiver window, and who the archive and the ingress accept. Prints one line per check and exits 1 if any failed.
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

    /** The Archive recorder's counters read at a take and at its persist give the window's bytes and time. */
    private static void archiveWrites()
    {
        check("no archive recorder counters: not reported", ArchiveWrites.find(counters(AeronCounters.ARCHIVE_RECORDER_TOTAL_WRITE_BYTES_TYPE_ID)) == null,
            "find with only type 106");
        final CountersManager cm = counters(AeronCounters.ARCHIVE_RECORDER_MAX_WRITE_TIME_TYPE_ID,
            AeronCounters.ARCHIVE_RECORDER_TOTAL_WRITE_BYTES_TYPE_ID, AeronCounters.ARCHIVE_RECORDER_TOTAL_WRITE_TIME_TYPE_ID);
        cm.setCounterValue(0, 9_000_000L);
        cm.setCounterValue(1, 1_000L);
        cm.setCounterValue(2, 5_000_000L);
        final NodeState st = new NodeState();
        st.archive = ArchiveWrites.find(cm);
        st.pendingWritesStart = st.archive == null ? null : st.archive.read();
        st.pendingStartNs = 0;
        st.pendingCount = 1;
        st.pendingSnapshot = new NodeState.Snapshot(77, 1, 10, 10, -1, 5, -1, false, 0);
        // The take wrote 29,957,920 bytes in 240 ms; then the snapshot counter moves and it is persisted.
        cm.setCounterValue(1, 1_000L + 29_957_920L);
        cm.setCounterValue(2, 245_000_000L);
        st.promoteSnapshot(2, 300_000_000L);
        cm.setCounterValue(1, 99_999_999L); // later writes do not move a persisted snapshot's figures
        final NodeState.SnapshotWrites w = st.snapshotWrites;
        check("a snapshot's archive writes are the counters' change from its take to its persist",
            w != null && w.index() == 77 && w.writes().bytes() == 29_957_920L && w.writes().timeNs() == 240_000_000L &&
            w.writes().maxNs() == 9_000_000L && st.lastSnapshot != null && st.lastSnapshot.persistedMs() == 300,
            String.valueOf(w));
        final StringBuilder sb = new StringBuilder("{");
        ArchiveWrites.json(sb, "engine_writes", w == null ? new ArchiveWrites.Sample(0, 0, 0) : w.writes());
        Json.close(sb);
        check("engine_writes as JSON (engine.EngineWrites)", sb.toString().equals(
            "{\"engine_writes\":{\"source\":\"aeron archive recorder counters (types 106, 107, 105)\",\"bytes\":29957920," +
            "\"time_ms\":240.000,\"max_ms\":9.000}}"), sb.toString());
    }

    /** What one connect with these credentials comes to: authenticated, rejected or still pending. */
    private static String connect(final Authenticator a, final long id, final byte[] credentials)
    {
        a.onConnectRequest(id, credentials, 0);
        final String[] seen = {"pending"};
        a.onConnectedSession(new SessionProxy()
        {
            public long sessionId()
            {
                return id;
            }

            public boolean challenge(final byte[] encodedChallenge)
            {
                seen[0] = "challenged";
                return true;
            }

            public boolean authenticate(final byte[] encodedPrincipal)
            {
                seen[0] = "authenticated";
                return true;
            }

            public void reject()
            {
                seen[0] = "rejected";
            }
        }, 0);
        return seen[0];
    }

    /** The archive and the ingress accept the run's own credential for each, and nothing else. */
    private static void runAuth()
    {
        final String secret = "the-runs-secret-0123456789";
        final RunAuth run = new RunAuth(secret.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        final RunAuth other = new RunAuth("another-runs-secret".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        final Authenticator archive = run.archiveAuthenticator().get();
        final Authenticator ingress = run.ingressAuthenticator().get();
        final byte[] own = RunAuth.archiveCredentials(run).encodedCredentials();
        final byte[] flipped = own.clone();
        flipped[flipped.length - 1] ^= 1;
        final String seen = String.join(", ", connect(archive, 1, own), connect(archive, 2, RunAuth.archiveCredentials(other).encodedCredentials()),
            connect(archive, 3, RunAuth.ingressCredentials(run).encodedCredentials()), connect(archive, 4, flipped),
            connect(archive, 5, RunAuth.archiveCredentials(null).encodedCredentials()), connect(archive, 6, secret.getBytes()),
            connect(ingress, 7, RunAuth.ingressCredentials(run).encodedCredentials()), connect(ingress, 8, own));
        check("the archive and the ingress accept only the run's credential for each",
            seen.equals("authenticated, rejected, rejected, rejected, rejected, rejected, authenticated, rejected"),
            "own, other run's, ingress's, one bit off, none, the raw secret; ingress: own, archive's: " + seen);
        final String shown = run.archiveAuthenticator() + " " + archive + " " + RunAuth.archiveCredentials(run) + " " +
            RunAuth.ingressCredentials(run) + " " + java.util.HexFormat.of().formatHex(own);
        check("the run's secret is in no toString", !shown.contains(secret) && !RunAuth.archiveCredentials(run).toString().contains(
            java.util.HexFormat.of().formatHex(own)), RunAuth.archiveCredentials(run) + ", " + archive);
    }

    /** The receiver window and socket buffers a preload needs, unless a -D says otherwise, capped by the kernel. */
    private static void bulkDefaults()
    {
        check("an unreadable sysctl gives its default", Node.sysctl("/nonexistent/rmem_max", 7) == 7, "7");
        System.clearProperty("aeron.socket.so_rcvbuf");
        System.clearProperty("aeron.rcv.initial.window.length");
        System.setProperty("aeron.socket.so_sndbuf", "262144");
        Node.smallMachineDefaults();
        final long rcv = Math.min(Node.BULK_WINDOW, Node.sysctl("/proc/sys/net/core/rmem_max", Node.BULK_WINDOW));
        check("receiver window and buffers default to 4 MiB capped by rmem_max; a -D stays",
            Long.toString(rcv).equals(System.getProperty("aeron.socket.so_rcvbuf")) &&
            Long.toString(rcv).equals(System.getProperty("aeron.rcv.initial.window.length")) &&
            "262144".equals(System.getProperty("aeron.socket.so_sndbuf")),
            "so_rcvbuf " + System.getProperty("aeron.socket.so_rcvbuf") + ", window " + System.getProperty("aeron.rcv.initial.window.length") +
            ", so_sndbuf " + System.getProperty("aeron.socket.so_sndbuf"));
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

        final NodeState ns = new NodeState();
        for (long id = 1; id <= 5; id++)
        {
            ns.positions.put(id, id * 100);
        }
        final int dropped = ns.forgetPositions(id -> id == 2 || id == 4);
        check("positions of requests no longer pending are forgotten", dropped == 3 && ns.positions.keySet().equals(java.util.Set.of(2L, 4L)),
            dropped + " dropped, kept " + ns.positions);

        final StringBuilder counts = new StringBuilder();
        Admin.snapshotCounts(counts, new NodeState.Snapshot(1216, 1, 2, 3, 4096, Introspection.UNSUPPORTED, 2, false, 0));
        final StringBuilder counted = new StringBuilder();
        Admin.snapshotCounts(counted, new NodeState.Snapshot(1216, 1, 2, 3, 4096, 0, 2, false, 0));
        check("a snapshot's uncounted orders and syncs are left out, not zero",
            !counts.toString().contains("orders") && !counts.toString().contains("syncs") && counted.toString().contains("\"orders\":0"),
            counts + " | " + counted);

        archiveWrites();
        bulkDefaults();
        runAuth();

        System.out.println(failed == 0 ? "ok" : failed + " check(s) failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
