package dev.rig.aeron;

import io.aeron.cluster.service.Cluster;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;

/** What the service thread publishes for the admin API and the gateway, which run on other threads. */
final class NodeState
{
    /** The last snapshot taken or restored, as /status last_snapshot reports it. */
    record Snapshot(long index, long term, double takeMs, long bytes, long orders, int chunks, boolean restored, double restoreMs)
    {
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
    volatile long snapshotsTaken;

    final ConcurrentLinkedQueue<CompletableFuture<Hash>> hashRequests = new ConcurrentLinkedQueue<>();
}
