package dev.rig.aeron;

import io.aeron.AeronCounters;
import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Publication;
import io.aeron.cluster.codecs.CloseReason;
import io.aeron.cluster.service.ClientSession;
import io.aeron.cluster.service.ClusterCounters;
import io.aeron.cluster.service.Cluster;
import io.aeron.cluster.service.ClusteredService;
import io.aeron.logbuffer.FragmentHandler;
import io.aeron.logbuffer.Header;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.agrona.DirectBuffer;
import org.agrona.ExpandableArrayBuffer;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The replicated state machine: applies docs/wire.md commands from the cluster log to an
 * {@link OrderBook} and answers each on the client session's egress.
 *
 * A log message is the gateway's 8-byte correlation id followed by the wire request body
 * (type, corr, payload); the egress answer is the same id followed by the wire response body.
 *
 * Snapshots go through Aeron's snapshot publication in {@link SnapshotCodec}'s records, each at
 * most the publication's max payload; a restore that finds the image partial or inconsistent
 * ends the JVM rather than run on a book it cannot vouch for.
 */
final class MatchingService implements ClusteredService
{

    private final NodeState state;
    private final OrderBook book = new OrderBook();
    private final OrderBook.Result result = new OrderBook.Result();
    private final ExpandableArrayBuffer out = new ExpandableArrayBuffer(256);
    private Cluster cluster;
    private IdleStrategy idle;
    /** The snapshot counter (type 205) found at the last take; -1 before one. */
    private int snapshotCounterId = -1;

    MatchingService(final NodeState state)
    {
        this.state = state;
    }

    @Override
    public void onStart(final Cluster cluster, final Image snapshotImage)
    {
        this.cluster = cluster;
        this.idle = cluster.idleStrategy();
        if (snapshotImage != null)
        {
            state.restoring = true;
            final long t0 = System.nanoTime();
            SnapshotCodec.Restore r = null;
            try
            {
                r = load(snapshotImage);
            }
            catch (final RuntimeException e)
            {
                Log.fatal("refusing the snapshot image at log position " + snapshotImage.joinPosition() +
                    " (source " + snapshotImage.sourceIdentity() + ")", e);
            }
            final double ms = (System.nanoTime() - t0) / 1e6;
            state.lastSnapshot = new NodeState.Snapshot(r.logPosition, state.leadershipTermId, 0, 0, r.counts.bytes, r.counts.orders,
                (int)r.counts.records, true, ms);
            Log.info(String.format("restored snapshot at log position %d: %d orders in %d records, %d bytes, %.1f ms, hash %016x",
                r.logPosition, r.counts.orders, r.counts.records, r.counts.bytes, ms, book.stateHash()));
            state.restoring = false;
        }
        publish();
        state.serviceStarted = true;
    }

    /** Polls the snapshot image into the book until its END record; a partial image throws. */
    private SnapshotCodec.Restore load(final Image image)
    {
        final SnapshotCodec.Restore r = new SnapshotCodec.Restore(book);
        final FragmentHandler handler = (b, off, len, header) -> r.record(b, off, len);
        while (!r.ended)
        {
            if (image.poll(handler, 16) > 0)
            {
                idle.reset();
                continue;
            }
            if (image.isEndOfStream() || image.isClosed())
            {
                r.finish();
            }
            idle.idle();
        }
        return r;
    }

    @Override
    public void onTakeSnapshot(final ExclusivePublication pub)
    {
        final long t0 = System.nanoTime();
        final long position = cluster.logPosition();
        final int max = pub.maxPayloadLength();
        final SnapshotCodec.Counts c = SnapshotCodec.write(book, position, max, (b, len) -> offer(pub, b, len));
        final double ms = (System.nanoTime() - t0) / 1e6;
        // Durable only once the consensus module has recorded it in the recording log and bumped
        // the snapshot counter (ConsensusModuleAgent.takeSnapshot); the admin API promotes it then.
        final int id = ClusterCounters.find(cluster.aeron().countersReader(), AeronCounters.CLUSTER_SNAPSHOT_COUNTER_TYPE_ID,
            cluster.context().clusterId());
        snapshotCounterId = id;
        state.pendingCount = id < 0 ? 0 : cluster.aeron().countersReader().getCounterValue(id);
        state.pendingStartNs = t0;
        state.pendingSnapshot = new NodeState.Snapshot(position, state.leadershipTermId, ms, ms, c.bytes, c.orders, (int)c.records, false, 0);
        Log.info(String.format("snapshot at log position %d: %d orders in %d records of at most %d bytes, %d bytes, %.1f ms",
            position, c.orders, c.records, max, c.bytes, ms));
    }

    private void offer(final ExclusivePublication pub, final UnsafeBuffer b, final int len)
    {
        idle.reset();
        while (true)
        {
            final long r = pub.offer(b, 0, len);
            if (r > 0)
            {
                return;
            }
            if (r == Publication.CLOSED || r == Publication.MAX_POSITION_EXCEEDED || r == Publication.NOT_CONNECTED)
            {
                throw new IllegalStateException("snapshot publication refused a record: " + Publication.errorString(r));
            }
            idle.idle();
        }
    }

    @Override
    public void onSessionMessage(
        final ClientSession session, final long timestamp, final DirectBuffer b, final int off, final int len, final Header header)
    {
        final long index = cluster.logPosition();
        final long gw = b.getLong(off);
        final int p = off + 8;
        final byte type = b.getByte(p);
        final long corr = b.getLong(p + 1);
        byte status = Wire.STATUS_OK;
        long filled = 0;
        long rested = 0;
        String text = null;
        switch (type)
        {
            case Wire.TYPE_ORDER:
                submit(b, p + Wire.REQUEST_HEADER);
                filled = result.filled;
                rested = result.rested;
                if (result.reject != null)
                {
                    status = Wire.STATUS_REJECTED;
                    text = result.reject;
                }
                break;
            case Wire.TYPE_CANCEL:
                text = book.cancel(b.getLong(p + Wire.REQUEST_HEADER));
                if (text != null)
                {
                    status = Wire.STATUS_REJECTED;
                }
                break;
            case Wire.TYPE_BATCH:
                final int count = b.getInt(p + Wire.REQUEST_HEADER);
                int rejected = 0;
                for (int i = 0, q = p + Wire.REQUEST_HEADER + 4; i < count; i++, q += Wire.ORDER_LEN)
                {
                    submit(b, q);
                    if (result.reject != null)
                    {
                        rejected++;
                    }
                    filled += result.filled;
                    rested += result.rested;
                }
                if (rejected > 0)
                {
                    status = Wire.STATUS_REJECTED;
                    text = rejected + " of " + count + " orders rejected";
                }
                break;
            default:
                // The gateway checks requests before they reach the log; a stranger is refused, not applied.
                status = Wire.STATUS_REJECTED;
                text = "unknown request type " + (type & 0xff);
        }
        out.putLong(0, gw);
        final int n = 8 + Wire.response(out, 8, type, corr, status, filled, rested, index, text);
        // Only the leader's session really sends; on followers offer is a no-op.
        for (int tries = 0; tries < 1000 && session.offer(out, 0, n) < 0; tries++)
        {
            idle.idle();
        }
        publish();
    }

    private void submit(final DirectBuffer b, final int q)
    {
        book.submit(b.getLong(q), b.getInt(q + 8) & 0xffffffffL, b.getByte(q + 12), b.getByte(q + 13), b.getByte(q + 14) == 1,
            b.getLong(q + 15), b.getLong(q + 23), result);
    }

    private void publish()
    {
        state.applied = cluster.logPosition();
        state.orders = book.orders();
    }

    @Override
    public int doBackgroundWork(final long nowNs)
    {
        int work = 0;
        CompletableFuture<NodeState.Hash> f;
        while ((f = state.hashRequests.poll()) != null)
        {
            f.complete(new NodeState.Hash(book.stateHash(), cluster.logPosition(), book.orders()));
            work++;
        }
        if (state.applied != cluster.logPosition())
        {
            publish();
        }
        if (state.pendingSnapshot != null && snapshotCounterId >= 0)
        {
            state.promoteSnapshot(cluster.aeron().countersReader().getCounterValue(snapshotCounterId), System.nanoTime());
        }
        return work;
    }

    @Override
    public void onSessionOpen(final ClientSession session, final long timestamp)
    {
        publish();
    }

    @Override
    public void onSessionClose(final ClientSession session, final long timestamp, final CloseReason closeReason)
    {
        publish();
    }

    @Override
    public void onTimerEvent(final long correlationId, final long timestamp)
    {
    }

    @Override
    public void onRoleChange(final Cluster.Role newRole)
    {
        state.role = newRole;
        Log.info("role " + newRole);
    }

    @Override
    public void onNewLeadershipTermEvent(
        final long leadershipTermId, final long logPosition, final long timestamp, final long termBaseLogPosition,
        final int leaderMemberId, final int logSessionId, final TimeUnit timeUnit, final int appVersion)
    {
        state.leadershipTermId = leadershipTermId;
        state.leaderMemberId = leaderMemberId;
        Log.info("leadership term " + leadershipTermId + " led by member " + leaderMemberId + " from log position " + logPosition);
    }

    @Override
    public void onTerminate(final Cluster cluster)
    {
        Log.info("cluster terminated the service at log position " + cluster.logPosition());
    }
}
