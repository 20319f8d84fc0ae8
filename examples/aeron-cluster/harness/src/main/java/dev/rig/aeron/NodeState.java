package dev.rig.aeron;

import io.aeron.cluster.service.Cluster;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;

/** What the decorator on the service thread publishes for the admin API and the gateway, which run on other threads. */
final class NodeState
{
    /**
     * The last snapshot taken or restored, as /status last_snapshot reports it. takeMs is the service's
     * onTakeSnapshot; persistedMs runs from the same start until the consensus module recorded the
     * snapshot as complete (the archive's recording of it stopped and the recording log updated, then
     * the snapshot counter bumped), so persistedMs >= takeMs. bytes and chunks are what the harness
     * counted on the snapshot stream (-1 when not counted, e.g. after a restore).
     */
    record Snapshot(long index, long term, double takeMs, double persistedMs, long bytes, long orders, long chunks, boolean restored,
        double restoreMs)
    {
        Snapshot persisted(final double ms)
        {
            return new Snapshot(index, term, takeMs, ms, bytes, orders, chunks, restored, restoreMs);
        }

        Snapshot counted(final long bytes, final long chunks)
        {
            return new Snapshot(index, term, takeMs, persistedMs, bytes, orders, chunks, restored, restoreMs);
        }
    }

    /** A state hash read on the service thread, with the position and order count it belongs to. */
    record Hash(long hash, long applied, long orders)
    {
    }

    /** The hash of the bytes of the snapshot at log position index. */
    record SnapshotHash(long index, long hash, long bytes, long chunks)
    {
    }

    /**
     * Held order ids read on the service thread (engine.HeldOrders): the introspection's, or the
     * applied record's (check); ranges null with why (error) when there are none.
     */
    record Held(long[][] ranges, long knownFrom, long applied, String check, String error)
    {
        static final String HELD = "held orders";
        static final String APPLIED = "applied ingress";
    }

    volatile long applied;
    volatile long orders = Introspection.UNSUPPORTED;
    volatile int leaderMemberId = -1;
    volatile long leadershipTermId = -1;
    volatile Cluster.Role role = Cluster.Role.FOLLOWER;
    volatile boolean restoring;
    volatile boolean serviceStarted;
    /** The log position of the snapshot this launch restored (0: none); held orders are counted from it. */
    volatile long restoredIndex;
    /** The last snapshot taken or restored that the consensus module has recorded as complete. */
    volatile Snapshot lastSnapshot;
    /** Written by the service, promoted to lastSnapshot once the snapshot counter passes pendingCount. */
    volatile Snapshot pendingSnapshot;
    volatile long pendingCount;
    /** System.nanoTime() when the service began the pending snapshot's take. */
    volatile long pendingStartNs;
    /** System.nanoTime() when the service's take returned (the persist's start). */
    volatile long pendingTakenNs;
    /** Where the node's phases are recorded; null: not recorded. */
    volatile PhaseLog phases;
    volatile long snapshotsTaken;
    /** The node's Archive recorder counters (null until found); read at a take's start and at its persist. */
    volatile ArchiveWrites archive;
    /** The Archive's counters when the pending snapshot's take began (null: not read). */
    volatile ArchiveWrites.Sample pendingWritesStart;
    /** The Archive's writes over a taken snapshot's window (take start to persisted), all recordings. */
    record SnapshotWrites(long index, ArchiveWrites.Sample writes)
    {
    }
    /** The writes of the last snapshot taken (not restored). */
    volatile SnapshotWrites snapshotWrites;
    /** The last snapshot whose bytes the harness hashed. */
    volatile SnapshotHash snapshotHash;

    /** Admin's change watcher (GET /changes), woken by changed(). */
    volatile Thread watcher;

    /** Wakes the change watcher at once: the service saw a role, a leadership term, a restore or a snapshot. */
    void changed()
    {
        final Thread t = watcher;
        if (t != null)
        {
            java.util.concurrent.locks.LockSupport.unpark(t);
        }
    }

    /** Gateway correlation id -> log position of the message that carried it (leader only; the ack's index). */
    final ConcurrentHashMap<Long, Long> positions = new ConcurrentHashMap<>();
    final Traps traps = new Traps();

    /**
     * Forgets the positions of requests no longer pending at the gateway (answered, timed out, or
     * failed over): a message applied with no answer would otherwise be kept until a role change.
     * Returns how many were dropped.
     */
    int forgetPositions(final java.util.function.LongPredicate pending)
    {
        final int before = positions.size();
        positions.keySet().removeIf(id -> !pending.test(id));
        return before - positions.size();
    }

    final ConcurrentLinkedQueue<CompletableFuture<Hash>> hashRequests = new ConcurrentLinkedQueue<>();
    final ConcurrentLinkedQueue<CompletableFuture<Held>> heldRequests = new ConcurrentLinkedQueue<>();

    /**
     * Makes the pending snapshot the reported one once the snapshot counter has moved past
     * pendingCount, timing its persist then. Called from the service thread's background work (so the
     * time is that of the service's duty cycle on every node) and from the admin API's threads.
     */
    synchronized void promoteSnapshot(final long snapshotCounter, final long nowNs)
    {
        final Snapshot p = pendingSnapshot;
        if (p != null && snapshotCounter > pendingCount)
        {
            if (persistedNs == 0)
            {
                persistedNs = nowNs; // persisted now, whenever the bytes are counted
                final PhaseLog pl = phases;
                if (pl != null)
                {
                    // The consensus module's part: the service thread went on meanwhile.
                    pl.add("snapshot_persist", PhaseLog.BLOCKS_NONE, PhaseLog.epochNsOf(pendingTakenNs), nowNs - pendingTakenNs,
                        "snapshot at log position " + p.index() + ": recorded by the consensus module (snapshot counter moved), beside the service thread");
                }
                final ArchiveWrites a = archive;
                persistedWrites = a == null ? null : a.read();
            }
            final SnapshotHash h = snapshotHash;
            final boolean counted = h != null && h.index() == p.index();
            // Reported with its bytes: the hasher reads the same stream as the archive and ends
            // with it, so this waits at most for its last fragments (5 s at worst, then without).
            if (!counted && hashing && nowNs - persistedNs < COUNT_WAIT_NS)
            {
                return;
            }
            pendingSnapshot = null;
            Snapshot s = p.persisted((persistedNs - pendingStartNs) / 1e6);
            persistedNs = 0;
            final ArchiveWrites.Sample w0 = pendingWritesStart;
            if (w0 != null && persistedWrites != null)
            {
                snapshotWrites = new SnapshotWrites(p.index(), persistedWrites.since(w0));
            }
            persistedWrites = null;
            if (counted)
            {
                s = s.counted(h.bytes(), h.chunks());
            }
            lastSnapshot = s;
            snapshotsTaken++;
            changed();
        }
    }

    private static final long COUNT_WAIT_NS = 5_000_000_000L;
    /** When the snapshot counter was first seen past pendingCount (0: not yet). */
    private long persistedNs;
    /** The Archive's counters at persistedNs. */
    private ArchiveWrites.Sample persistedWrites;
    /** Whether a SnapshotHasher counts the snapshot stream. */
    volatile boolean hashing;

    /** Records the hash of a snapshot's bytes and fills in the counts of the snapshot it belongs to. */
    synchronized void snapshotHashed(final SnapshotHash h)
    {
        snapshotHash = h;
        final Snapshot s = lastSnapshot;
        if (s != null && s.index() == h.index() && !s.restored())
        {
            lastSnapshot = s.counted(h.bytes(), h.chunks());
        }
    }
}
