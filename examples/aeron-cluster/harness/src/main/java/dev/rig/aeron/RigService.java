package dev.rig.aeron;

import io.aeron.AeronCounters;
import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.cluster.codecs.CloseReason;
import io.aeron.cluster.service.ClientSession;
import io.aeron.cluster.service.Cluster;
import io.aeron.cluster.service.ClusterCounters;
import io.aeron.cluster.service.ClusteredService;
import io.aeron.logbuffer.Header;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.agrona.DirectBuffer;

/**
 * The decorator around the user's ClusteredService: every callback goes to the service unchanged,
 * and the harness records around it what rig needs (restore and take timing, role, leadership term,
 * the applied log position and the position each gateway request was logged at). Introspection,
 * when the user gives one, runs here on the service thread, in doBackgroundWork.
 */
final class RigService implements ClusteredService
{
    private final ClusteredService service;
    private final RigCodec codec;
    private final Introspection introspection;
    private final NodeState state;
    private final boolean heldSupported;
    /** Where the applied record lives (the node's data folder); opened in onStart, after the data folder's lock. */
    private final java.io.File recordDir;
    private AppliedRecord record;
    /** Why the record stopped (a file error), or null. */
    private String recordError;
    private Cluster cluster;
    /** The applied position state.orders was read at. */
    private long ordersAt = -1;
    /** The snapshot counter found at the last take; -1 before one. */
    private int snapshotCounterId = -1;

    RigService(
        final ClusteredService service, final RigCodec codec, final Introspection introspection, final NodeState state,
        final java.io.File recordDir)
    {
        this.service = service;
        this.codec = codec;
        this.introspection = introspection;
        this.state = state;
        this.recordDir = recordDir;
        this.heldSupported = Admin.overrides(introspection, "heldOrderIds");
        state.traps.codec = codec.getClass().getName();
    }

    @Override
    public void onStart(final Cluster cluster, final Image snapshotImage)
    {
        this.cluster = cluster;
        try
        {
            record = new AppliedRecord(recordDir);
        }
        catch (final java.io.IOException e)
        {
            recordFailed("open", e);
        }
        if (snapshotImage == null)
        {
            service.onStart(cluster, null);
        }
        else
        {
            state.restoring = true;
            state.changed();
            final long t0 = System.nanoTime();
            // A service that cannot load its snapshot throws; the container logs it and the node must
            // not run on a state it cannot vouch for.
            try
            {
                service.onStart(cluster, snapshotImage);
            }
            catch (final RuntimeException | Error e)
            {
                Log.fatal("the service refused the snapshot image at log position " + snapshotImage.joinPosition(), e);
            }
            final long t1 = System.nanoTime();
            final double ms = (t1 - t0) / 1e6;
            final long index = cluster.logPosition();
            final PhaseLog pl = state.phases;
            if (pl != null)
            {
                pl.add("restore", PhaseLog.BLOCKS_READY, PhaseLog.epochNsOf(t0), t1 - t0,
                    "snapshot at log position " + index + ": loaded by the service (onStart)");
            }
            state.restoredIndex = index;
            state.lastSnapshot = new NodeState.Snapshot(index, state.leadershipTermId, 0, 0, -1, orders(), -1, true, ms);
            Log.info(String.format("restored snapshot at log position %d in %.1f ms", index, ms));
            state.restoring = false;
        }
        final long restored = snapshotImage == null ? -1 : cluster.logPosition();
        onRecord("restart", r -> r.restart(restored));
        publish();
        state.serviceStarted = true;
        state.changed();
    }

    @Override
    public void onSessionMessage(
        final ClientSession session, final long timestamp, final DirectBuffer buffer, final int offset, final int length,
        final Header header)
    {
        // Recorded before the service answers: its egress can reach the gateway before this returns.
        final boolean leader = state.role == Cluster.Role.LEADER;
        final long id = codec.ingressCorrelationId(buffer, offset, length);
        if (leader)
        {
            state.positions.put(id, cluster.logPosition());
        }
        if (record != null) // not through onRecord: no lambda per message
        {
            try
            {
                record.applied(cluster.logPosition(), id);
            }
            catch (final java.io.IOException e)
            {
                recordFailed("write", e);
            }
        }
        try
        {
            service.onSessionMessage(session, timestamp, buffer, offset, length, header);
        }
        catch (final RuntimeException | Error e)
        {
            // Answered now, so the request is not left to time out and be resent (it was applied);
            // then thrown on, so the container handles the service exactly as without the harness.
            final String text = state.traps.serviceError(e, cluster.logPosition());
            if (leader)
            {
                Traps.answerError(session, id, text);
            }
            throw e;
        }
        state.applied = cluster.logPosition();
    }

    @Override
    public void onTakeSnapshot(final ExclusivePublication snapshotPublication)
    {
        if (state.archive == null)
        {
            state.archive = ArchiveWrites.find(cluster.aeron().countersReader());
        }
        final ArchiveWrites archive = state.archive;
        final ArchiveWrites.Sample writes = archive == null ? null : archive.read();
        final long t0 = System.nanoTime();
        final long position = cluster.logPosition();
        onRecord("force", r -> r.snapshot(position));
        service.onTakeSnapshot(snapshotPublication);
        final long t1 = System.nanoTime();
        final double ms = (t1 - t0) / 1e6;
        final PhaseLog pl = state.phases;
        if (pl != null)
        {
            pl.add("snapshot_capture", PhaseLog.BLOCKS_APPLY, PhaseLog.epochNsOf(t0), t1 - t0,
                "snapshot at log position " + position + ": written by the service (onTakeSnapshot) on the service thread");
        }
        state.pendingTakenNs = t1;
        // Durable only once the consensus module has recorded it in the recording log and bumped
        // the snapshot counter (ConsensusModuleAgent.takeSnapshot); promoted then.
        final int id = ClusterCounters.find(cluster.aeron().countersReader(), AeronCounters.CLUSTER_SNAPSHOT_COUNTER_TYPE_ID,
            cluster.context().clusterId());
        snapshotCounterId = id;
        state.pendingCount = id < 0 ? 0 : cluster.aeron().countersReader().getCounterValue(id);
        state.pendingStartNs = t0;
        state.pendingWritesStart = writes;
        state.pendingSnapshot = new NodeState.Snapshot(position, state.leadershipTermId, ms, ms, -1, orders(), -1, false, 0);
        Log.info(String.format("snapshot at log position %d: the service wrote it in %.1f ms", position, ms));
    }

    @Override
    public int doBackgroundWork(final long nowNs)
    {
        int work = service.doBackgroundWork(nowNs);
        CompletableFuture<NodeState.Hash> f;
        while ((f = state.hashRequests.poll()) != null)
        {
            f.complete(new NodeState.Hash(introspection.stateHash(), cluster.logPosition(), orders()));
            work++;
        }
        CompletableFuture<NodeState.Held> h;
        while ((h = state.heldRequests.poll()) != null)
        {
            h.complete(held());
            work++;
        }
        onRecord("write", AppliedRecord::flush);
        // Resting orders are read once per duty cycle that applied something, not per message:
        // the user's count may cost more than a field read.
        if (state.applied != ordersAt || state.applied != cluster.logPosition())
        {
            publish();
        }
        if (state.pendingSnapshot != null && snapshotCounterId >= 0)
        {
            state.promoteSnapshot(cluster.aeron().countersReader().getCounterValue(snapshotCounterId), System.nanoTime());
        }
        return work;
    }

    /** GET /orders: the introspection's held ids, or else the applied record's. */
    private NodeState.Held held()
    {
        if (heldSupported)
        {
            return new NodeState.Held(introspection.heldOrderIds(), state.restoredIndex, cluster.logPosition(), NodeState.Held.HELD, null);
        }
        final long[][][] ranges = new long[1][][];
        onRecord("read", r -> ranges[0] = r.ranges());
        return record == null ?
            new NodeState.Held(null, 0, cluster.logPosition(), NodeState.Held.APPLIED, recordError) :
            new NodeState.Held(ranges[0], record.knownFrom(), cluster.logPosition(), NodeState.Held.APPLIED, null);
    }

    /** One step on the applied record, while there is one. */
    private interface RecordStep
    {
        void apply(AppliedRecord r) throws java.io.IOException;
    }

    /** Runs step on the record while there is one. */
    private void onRecord(final String what, final RecordStep step)
    {
        if (record == null)
        {
            return;
        }
        try
        {
            step.apply(record);
        }
        catch (final java.io.IOException e)
        {
            recordFailed(what, e);
        }
    }

    /** A file error drops the record, not the node: durability goes unchecked, and says why. */
    private void recordFailed(final String what, final java.io.IOException e)
    {
        recordError = "the applied record in " + new java.io.File(recordDir, AppliedRecord.FILE) + ": " + what + ": " + e;
        Log.warn(recordError + " (GET /orders answers without it: durability unchecked)");
        record = null;
    }

    private long orders()
    {
        return introspection.restingOrders();
    }

    private void publish()
    {
        state.applied = cluster.logPosition();
        state.orders = orders();
        ordersAt = state.applied;
    }

    @Override
    public void onSessionOpen(final ClientSession session, final long timestamp)
    {
        service.onSessionOpen(session, timestamp);
    }

    @Override
    public void onSessionClose(final ClientSession session, final long timestamp, final CloseReason closeReason)
    {
        service.onSessionClose(session, timestamp, closeReason);
    }

    @Override
    public void onTimerEvent(final long correlationId, final long timestamp)
    {
        service.onTimerEvent(correlationId, timestamp);
    }

    @Override
    public void onRoleChange(final Cluster.Role newRole)
    {
        state.role = newRole;
        if (newRole != Cluster.Role.LEADER)
        {
            state.positions.clear();
        }
        state.changed();
        Log.info("role " + newRole);
        service.onRoleChange(newRole);
    }

    @Override
    public void onNewLeadershipTermEvent(
        final long leadershipTermId, final long logPosition, final long timestamp, final long termBaseLogPosition,
        final int leaderMemberId, final int logSessionId, final TimeUnit timeUnit, final int appVersion)
    {
        state.leadershipTermId = leadershipTermId;
        state.leaderMemberId = leaderMemberId;
        state.changed();
        Log.info("leadership term " + leadershipTermId + " led by member " + leaderMemberId + " from log position " + logPosition);
        service.onNewLeadershipTermEvent(leadershipTermId, logPosition, timestamp, termBaseLogPosition, leaderMemberId, logSessionId,
            timeUnit, appVersion);
    }

    @Override
    public void onTerminate(final Cluster cluster)
    {
        Log.info("cluster terminated the service at log position " + cluster.logPosition());
        service.onTerminate(cluster);
    }
}
