package dev.rig.aeron.matching;

import dev.rig.aeron.Log;
import dev.rig.aeron.Wire;
import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Publication;
import io.aeron.cluster.codecs.CloseReason;
import io.aeron.cluster.service.ClientSession;
import io.aeron.cluster.service.Cluster;
import io.aeron.cluster.service.ClusteredService;
import io.aeron.logbuffer.FragmentHandler;
import io.aeron.logbuffer.Header;
import org.agrona.DirectBuffer;
import org.agrona.ExpandableArrayBuffer;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The replicated state machine: applies docs/wire.md commands from the cluster log to an
 * {@link OrderBook} and answers each on the client session's egress. A plain ClusteredService:
 * nothing of rig's harness is in it (rig-aeron wraps it; {@link Main}).
 *
 * A log message is a docs/wire.md request body (type, corr, payload); the egress answer is the
 * wire response body with the same corr. Snapshots go through Aeron's snapshot publication in
 * {@link SnapshotCodec}'s records, each at most the publication's max payload; a restore that finds
 * the image partial or inconsistent throws, and the harness ends the JVM rather than run on a book
 * it cannot vouch for.
 */
public final class MatchingService implements ClusteredService
{
    /** -Drig.example.trap=throw-every=N: single orders whose id N divides throw, as a faulty service would (the harness's traps). */
    private static final long THROW_EVERY = Main.TRAP.startsWith("throw-every=") ? Long.parseLong(Main.TRAP.substring(12)) : 0;
    private final OrderBook book = new OrderBook();
    private final OrderBook.Result result = new OrderBook.Result();
    private final HeldIds held = new HeldIds();
    private final ExpandableArrayBuffer out = new ExpandableArrayBuffer(256);
    private Cluster cluster;
    private IdleStrategy idle;

    /** The book's state hash (engine/book's StateHash); call on the service thread. */
    public long stateHash()
    {
        return book.stateHash();
    }

    /** Resting orders; call on the service thread. */
    public int orders()
    {
        return book.orders();
    }

    /** The single orders accepted since start or restore, as closed ranges {lo, hi}; call on the service thread. */
    public long[][] heldOrderIds()
    {
        return held.toArray();
    }

    @Override
    public void onStart(final Cluster cluster, final Image snapshotImage)
    {
        this.cluster = cluster;
        this.idle = cluster.idleStrategy();
        if (snapshotImage != null)
        {
            final SnapshotCodec.Restore r = load(snapshotImage);
            Log.info(String.format("restored snapshot at log position %d: %d orders in %d records, %d bytes, hash %016x",
                r.logPosition, r.counts.orders, r.counts.records, r.counts.bytes, book.stateHash()));
        }
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
        final long position = cluster.logPosition();
        final int max = pub.maxPayloadLength();
        final SnapshotCodec.Counts c = SnapshotCodec.write(book, position, max, (b, len) -> offer(pub, b, len));
        Log.info(String.format("snapshot at log position %d: %d orders in %d records of at most %d bytes, %d bytes",
            position, c.orders, c.records, max, c.bytes));
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
        final int p = off;
        final byte type = b.getByte(p);
        final long corr = b.getLong(p + 1);
        byte status = Wire.STATUS_OK;
        long filled = 0;
        long rested = 0;
        String text = null;
        switch (type)
        {
            case Wire.TYPE_ORDER:
                if (THROW_EVERY > 0 && b.getLong(p + Wire.REQUEST_HEADER) % THROW_EVERY == 0)
                {
                    throw new IllegalStateException("order " + b.getLong(p + Wire.REQUEST_HEADER) + " refused on purpose (-Drig.example.trap)");
                }
                submit(b, p + Wire.REQUEST_HEADER);
                filled = result.filled;
                rested = result.rested;
                if (result.reject != null)
                {
                    status = Wire.STATUS_REJECTED;
                    text = result.reject;
                }
                else
                {
                    held.add(b.getLong(p + Wire.REQUEST_HEADER));
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
        final int n = Wire.response(out, 0, type, corr, status, filled, rested, index, text);
        // Only the leader's session really sends; on followers (and in replay) there is no session.
        for (int tries = 0; session != null && tries < 1000 && session.offer(out, 0, n) < 0; tries++)
        {
            idle.idle();
        }
    }

    private void submit(final DirectBuffer b, final int q)
    {
        book.submit(b.getLong(q), b.getInt(q + 8) & 0xffffffffL, b.getByte(q + 12), b.getByte(q + 13), b.getByte(q + 14) == 1,
            b.getLong(q + 15), b.getLong(q + 23), result);
    }

    @Override
    public void onSessionOpen(final ClientSession session, final long timestamp)
    {
    }

    @Override
    public void onSessionClose(final ClientSession session, final long timestamp, final CloseReason closeReason)
    {
    }

    @Override
    public void onTimerEvent(final long correlationId, final long timestamp)
    {
    }

    @Override
    public void onRoleChange(final Cluster.Role newRole)
    {
    }

    @Override
    public void onTerminate(final Cluster cluster)
    {
    }
}
