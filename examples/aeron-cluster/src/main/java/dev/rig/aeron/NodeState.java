package dev.rig.aeron;

import io.aeron.cluster.service.Cluster;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;

/** What the service thread publishes for the admin API and the gateway, which run on other threads. */
final class NodeState
{
    /**
     * The last snapshot taken or restored, as /status last_snapshot reports it. takeMs is the service's
     * onTakeSnapshot (walking the book into the snapshot publication); persistedMs runs from the same
     * start until the consensus module recorded the snapshot as complete (the archive's recording of it
     * stopped and the recording log updated, then the snapshot counter bumped), so persistedMs >= takeMs.
     */
    record Snapshot(long index, long term, double takeMs, double persistedMs, long bytes, long orders, int chunks, boolean restored,
        double restoreMs)
    {
        Snapshot persisted(final double ms)
        {
            return new Snapshot(index, term, takeMs, ms, bytes, orders, chunks, restored, restoreMs);
        }
    }

    /** A state hash read on the service thread, with the position and order count it belongs to. */
    record Hash(long hash, long applied, int orders)
    {
    }

    volatile long applied;
    volatile int orders;
    volatile int leaderMemberId = -1;
    volatile long leadershipTermId = -1;
    volatile Cluster.Role role = Cluster.Role.FOLLOWER;
    volatile boolean restoring;
    volatile boolean serviceStarted;
    /** The last snapshot taken or restored that the consensus module has recorded as complete. */
    volatile Snapshot lastSnapshot;
    /** Written by the service, promoted to lastSnapshot once the snapshot counter passes pendingCount. */
    volatile Snapshot pendingSnapshot;
    volatile long pendingCount;
    /** System.nanoTime() when the service began the pending snapshot's take. */
    volatile long pendingStartNs;
    volatile long snapshotsTaken;

    /**
     * Makes the pending snapshot the reported one once the snapshot counter (type 205) has moved past
     * pendingCount, timing its persist then. Called from the service thread's background work (so the
     * time is that of the service's duty cycle on every node) and from the admin API's threads.
     */
    synchronized void promoteSnapshot(final long snapshotCounter, final long nowNs)
    {
        final Snapshot p = pendingSnapshot;
        if (p != null && snapshotCounter > pendingCount)
        {
            pendingSnapshot = null;
            lastSnapshot = p.persisted((nowNs - pendingStartNs) / 1e6);
            snapshotsTaken++;
        }
    }

    final ConcurrentLinkedQueue<CompletableFuture<Hash>> hashRequests = new ConcurrentLinkedQueue<>();
}
