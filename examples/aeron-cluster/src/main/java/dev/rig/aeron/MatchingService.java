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
 * Snapshots go through Aeron's snapshot publication as a BEGIN record, BATCH records of whole
 * orders, and an END record, each at most the publication's max payload (so no record is
 * fragmented and no offer is larger than one frame). Restore checks the counts and the state
 * hash against BEGIN and END, and refuses an image that ends before END.
 */
final class MatchingService implements ClusteredService
{
    static final byte SNAP_BEGIN = 1;
    static final byte SNAP_BATCH = 2;
    static final byte SNAP_END = 3;
    static final byte SNAP_VERSION = 1;
    static final int SNAP_ORDER_LEN = 29; // id 8, instrument 4, side 1, price 8, qty 8
    static final int SNAP_BATCH_HEADER = 4; // kind 1, pad 1, count u16

    private final NodeState state;
    private final OrderBook book = new OrderBook();
    private final OrderBook.Result result = new OrderBook.Result();
    private final ExpandableArrayBuffer out = new ExpandableArrayBuffer(256);
    private Cluster cluster;
    private IdleStrategy idle;

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
            final Restore r = new Restore();
            try
            {
                r.load(snapshotImage);
            }
            catch (final RuntimeException e)
            {
                Log.fatal("refusing the snapshot image at log position " + snapshotImage.joinPosition() +
                    " (recording " + snapshotImage.sourceIdentity() + ")", e);
            }
            final double ms = (System.nanoTime() - t0) / 1e6;
            state.lastSnapshot = new NodeState.Snapshot(r.logPosition, state.leadershipTermId, 0, r.bytes, r.orders, r.chunks, true, ms);
            Log.info(String.format("restored snapshot at log position %d: %d orders in %d chunks, %d bytes, %.1f ms, hash %016x",
                r.logPosition, r.orders, r.chunks, r.bytes, ms, book.stateHash()));
            state.restoring = false;
        }
        publish();
        state.serviceStarted = true;
    }

    /** Reads a snapshot image record by record and checks it is whole. */
    private final class Restore implements FragmentHandler
    {
        long wantOrders = -1;
        long logPosition;
        long orders;
        long bytes;
        int chunks;
        boolean ended;

        void load(final Image image)
        {
            while (!ended)
            {
                final int n = image.poll(this, 16);
                if (n == 0)
                {
                    if (image.isEndOfStream() || image.isClosed())
                    {
                        throw new IllegalStateException("snapshot image ended after " + chunks + " chunks and " + orders +
                            " orders, before its END record (begin said " + wantOrders + " orders): a partial image");
                    }
                    idle.idle();
                }
                else
                {
                    idle.reset();
                }
            }
            if (book.orders() != wantOrders)
            {
                throw new IllegalStateException("snapshot restored " + book.orders() + " orders, BEGIN said " + wantOrders);
            }
        }

        @Override
        public void onFragment(final DirectBuffer b, final int off, final int len, final Header header)
        {
            if (ended)
            {
                return;
            }
            bytes += len;
            chunks++;
            final byte kind = b.getByte(off);
            if (wantOrders < 0 && kind != SNAP_BEGIN)
            {
                throw new IllegalStateException("snapshot starts with record kind " + kind + ", want BEGIN (" + SNAP_BEGIN + ")");
            }
            switch (kind)
            {
                case SNAP_BEGIN:
                    if (wantOrders >= 0)
                    {
                        throw new IllegalStateException("second BEGIN record in a snapshot");
                    }
                    if (b.getByte(off + 1) != SNAP_VERSION)
                    {
                        throw new IllegalStateException("snapshot version " + b.getByte(off + 1) + ", want " + SNAP_VERSION);
                    }
                    wantOrders = b.getLong(off + 8);
                    logPosition = b.getLong(off + 16);
                    break;
                case SNAP_BATCH:
                    final int count = b.getShort(off + 2) & 0xffff;
                    if (len != SNAP_BATCH_HEADER + count * SNAP_ORDER_LEN)
                    {
                        throw new IllegalStateException("BATCH record of " + len + " bytes for " + count + " orders");
                    }
                    int p = off + SNAP_BATCH_HEADER;
                    for (int i = 0; i < count; i++, p += SNAP_ORDER_LEN)
                    {
                        book.restore(b.getLong(p), b.getInt(p + 8) & 0xffffffffL, b.getByte(p + 12), b.getLong(p + 13), b.getLong(p + 21));
                    }
                    orders += count;
                    break;
                case SNAP_END:
                    final long endOrders = b.getLong(off + 8);
                    final long endHash = b.getLong(off + 16);
                    final int endChunks = b.getInt(off + 4);
                    if (endOrders != orders || endOrders != wantOrders || endChunks != chunks)
                    {
                        throw new IllegalStateException("END record says " + endOrders + " orders in " + endChunks +
                            " chunks; read " + orders + " orders in " + chunks + " chunks, BEGIN said " + wantOrders);
                    }
                    if (endHash != book.stateHash())
                    {
                        throw new IllegalStateException(String.format("END record hash %016x, restored book hashes %016x", endHash, book.stateHash()));
                    }
                    ended = true;
                    break;
                default:
                    throw new IllegalStateException("unknown snapshot record kind " + kind);
            }
        }
    }

    @Override
    public void onTakeSnapshot(final ExclusivePublication pub)
    {
        final long t0 = System.nanoTime();
        final int max = pub.maxPayloadLength();
        final int perChunk = Math.min(0xffff, (max - SNAP_BATCH_HEADER) / SNAP_ORDER_LEN);
        final UnsafeBuffer chunk = new UnsafeBuffer(new byte[max]);
        final long position = cluster.logPosition();
        final long[] counts = {0, 0, 0}; // chunks, bytes, orders in the open batch

        chunk.setMemory(0, 24, (byte)0);
        chunk.putByte(0, SNAP_BEGIN);
        chunk.putByte(1, SNAP_VERSION);
        chunk.putLong(8, book.orders());
        chunk.putLong(16, position);
        offer(pub, chunk, 24, counts);

        final int[] n = {0};
        book.walk((instrument, side, price, id, qty) ->
        {
            final int p = SNAP_BATCH_HEADER + n[0] * SNAP_ORDER_LEN;
            chunk.putLong(p, id);
            chunk.putInt(p + 8, (int)instrument);
            chunk.putByte(p + 12, side);
            chunk.putLong(p + 13, price);
            chunk.putLong(p + 21, qty);
            if (++n[0] == perChunk)
            {
                flushBatch(pub, chunk, n, counts);
            }
        });
        flushBatch(pub, chunk, n, counts);

        chunk.setMemory(0, 24, (byte)0);
        chunk.putByte(0, SNAP_END);
        chunk.putInt(4, (int)counts[0] + 1);
        chunk.putLong(8, book.orders());
        chunk.putLong(16, book.stateHash());
        offer(pub, chunk, 24, counts);

        final double ms = (System.nanoTime() - t0) / 1e6;
        // Durable only once the consensus module has recorded it in the recording log and bumped
        // the snapshot counter (ConsensusModuleAgent.takeSnapshot); the admin API promotes it then.
        final int id = ClusterCounters.find(cluster.aeron().countersReader(), AeronCounters.CLUSTER_SNAPSHOT_COUNTER_TYPE_ID,
            cluster.context().clusterId());
        state.pendingCount = id < 0 ? 0 : cluster.aeron().countersReader().getCounterValue(id);
        state.pendingSnapshot = new NodeState.Snapshot(position, state.leadershipTermId, ms, counts[1], book.orders(), (int)counts[0], false, 0);
        Log.info(String.format("snapshot at log position %d: %d orders in %d chunks of at most %d bytes, %d bytes, %.1f ms",
            position, book.orders(), counts[0], max, counts[1], ms));
    }

    private void flushBatch(final ExclusivePublication pub, final UnsafeBuffer chunk, final int[] n, final long[] counts)
    {
        if (n[0] == 0)
        {
            return;
        }
        chunk.putByte(0, SNAP_BATCH);
        chunk.putByte(1, (byte)0);
        chunk.putShort(2, (short)n[0]);
        offer(pub, chunk, SNAP_BATCH_HEADER + n[0] * SNAP_ORDER_LEN, counts);
        n[0] = 0;
    }

    private void offer(final ExclusivePublication pub, final UnsafeBuffer b, final int len, final long[] counts)
    {
        idle.reset();
        while (true)
        {
            final long r = pub.offer(b, 0, len);
            if (r > 0)
            {
                break;
            }
            if (r == Publication.CLOSED || r == Publication.MAX_POSITION_EXCEEDED || r == Publication.NOT_CONNECTED)
            {
                throw new IllegalStateException("snapshot publication refused a chunk: " + Publication.errorString(r));
            }
            idle.idle();
        }
        counts[0]++;
        counts[1] += len;
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
