package dev.rig.aeron;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import org.agrona.collections.LongArrayList;

/**
 * The correlation ids of the ingress messages this node's service applied, with the log position
 * of each, in a file of the node's data folder that outlives the process: what GET /orders answers
 * for a service whose introspection gives no held order ids (engine.HeldOrders, check "applied
 * ingress"). The gateway sends a single order with its rig order id as the correlation id, so the
 * ids are the ledger's.
 *
 * A relaunched node restores its latest snapshot and the container re-applies every message after
 * it, so the file keeps what its snapshot covers and drops the rest, which the replay writes again.
 * Each snapshot take leaves a marker (the position, negated, minus one) and forces the file, so
 * what a snapshot covers is on disk when the snapshot is. Restored from a snapshot with no marker
 * here (taken before the file existed), ids at or below its position are unknown (knownFrom).
 * Records are 16 bytes little-endian: position, correlation id. Nothing is held in memory but a
 * write buffer: the file is read at the start and when asked for the ranges. Service thread only.
 */
final class AppliedRecord
{
    static final String FILE = "rig-applied.bin";
    private static final int RECORD = 16;

    private final FileChannel file;
    private final ByteBuffer buf = ByteBuffer.allocateDirect(64 * 1024).order(ByteOrder.LITTLE_ENDIAN);
    private long knownFrom;

    AppliedRecord(final File dataDir) throws IOException
    {
        file = FileChannel.open(new File(dataDir, FILE).toPath(), StandardOpenOption.CREATE, StandardOpenOption.READ,
            StandardOpenOption.WRITE);
    }

    /** Calls {@code each} with every whole record's position and id, in file order; stops when it returns false. */
    private void scan(final RecordVisitor each) throws IOException
    {
        final ByteBuffer in = ByteBuffer.allocate(RECORD * 4096).order(ByteOrder.LITTLE_ENDIAN);
        long at = 0;
        final long size = file.size() - file.size() % RECORD; // a torn last record (a kill mid-write) is left out
        while (at < size)
        {
            in.clear().limit((int)Math.min(in.capacity(), size - at));
            while (in.hasRemaining())
            {
                if (file.read(in, at + in.position()) < 0)
                {
                    throw new IOException("short read at " + (at + in.position()));
                }
            }
            for (int i = 0; i < in.limit(); i += RECORD, at += RECORD)
            {
                if (!each.record(at, in.getLong(i), in.getLong(i + 8)))
                {
                    return;
                }
            }
        }
    }

    private interface RecordVisitor
    {
        boolean record(long offset, long position, long id);
    }

    private static long position(final long recorded)
    {
        return recorded >= 0 ? recorded : -recorded - 1;
    }

    /**
     * The service starts from the snapshot at {@code snapshotPosition} (-1: none, the whole log is
     * applied again): keeps what the snapshot covers, drops what the replay applies again.
     */
    void restart(final long snapshotPosition) throws IOException
    {
        final long[] marker = {-1};
        final long[] covered = {0};
        if (snapshotPosition >= 0)
        {
            scan((offset, position, id) ->
            {
                if (position == -snapshotPosition - 1)
                {
                    marker[0] = offset + RECORD;
                }
                if (position(position) <= snapshotPosition)
                {
                    covered[0] = offset + RECORD;
                }
                return true;
            });
        }
        // No marker: what the file holds up to the snapshot is kept, but may be incomplete.
        knownFrom = snapshotPosition >= 0 && marker[0] < 0 ? snapshotPosition : 0;
        final long keep = marker[0] >= 0 ? marker[0] : covered[0];
        file.truncate(keep);
        file.position(keep);
    }

    /** The service applied the message with {@code id} at {@code position}; written by {@link #flush}. */
    void applied(final long position, final long id) throws IOException
    {
        if (buf.remaining() < RECORD)
        {
            flush();
        }
        buf.putLong(position).putLong(id);
    }

    /** A snapshot taken at {@code position}: marked and forced, with everything before it. */
    void snapshot(final long position) throws IOException
    {
        applied(-position - 1, 0);
        flush();
        file.force(false);
    }

    /** Writes the buffered records (to the page cache; a replay rewrites what a kill loses). */
    void flush() throws IOException
    {
        buf.flip();
        while (buf.hasRemaining())
        {
            file.write(buf);
        }
        buf.clear();
    }

    long knownFrom()
    {
        return knownFrom;
    }

    /** The applied correlation ids as closed ranges, ascending as unsigned 64-bit (engine.HeldOrders). */
    long[][] ranges() throws IOException
    {
        flush();
        final LongArrayList flipped = new LongArrayList();
        scan((offset, position, id) ->
        {
            if (position >= 0)
            {
                flipped.addLong(id ^ Long.MIN_VALUE); // unsigned order as signed
            }
            return true;
        });
        final long[] a = flipped.toLongArray();
        Arrays.sort(a);
        final LongArrayList lo = new LongArrayList();
        final LongArrayList hi = new LongArrayList();
        for (final long f : a)
        {
            final long v = f ^ Long.MIN_VALUE;
            final int last = hi.size() - 1;
            if (last >= 0 && (v == hi.getLong(last) || v == hi.getLong(last) + 1))
            {
                hi.setLong(last, v);
            }
            else
            {
                lo.addLong(v);
                hi.addLong(v);
            }
        }
        final long[][] out = new long[lo.size()][];
        for (int i = 0; i < out.length; i++)
        {
            out[i] = new long[] {lo.getLong(i), hi.getLong(i)};
        }
        return out;
    }
}
