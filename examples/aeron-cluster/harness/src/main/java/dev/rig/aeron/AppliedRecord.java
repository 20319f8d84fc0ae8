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
 * Each snapshot take leaves a marker (the negated position) and forces the file, so what a snapshot
 * covers is on disk when the snapshot is. Restored from a snapshot with no marker here (taken
 * before the file existed), ids at or below its position are unknown (knownFrom). Records are
 * 16 bytes little-endian: position, correlation id. Service thread only, but for {@link #ranges}.
 */
final class AppliedRecord
{
    static final String FILE = "rig-applied.bin";
    private static final int RECORD = 16;

    private final FileChannel file;
    private final ByteBuffer buf = ByteBuffer.allocateDirect(64 * 1024).order(ByteOrder.LITTLE_ENDIAN);
    /** Every position read from the file or appended, and its id (a marker's id is 0). */
    private final LongArrayList positions = new LongArrayList();
    private final LongArrayList ids = new LongArrayList();
    private volatile long knownFrom;

    AppliedRecord(final File dataDir) throws IOException
    {
        file = FileChannel.open(new File(dataDir, FILE).toPath(), StandardOpenOption.CREATE, StandardOpenOption.READ,
            StandardOpenOption.WRITE);
        final long size = file.size() - file.size() % RECORD; // a torn last record (a kill mid-write) is dropped
        final ByteBuffer in = ByteBuffer.allocate(RECORD).order(ByteOrder.LITTLE_ENDIAN);
        for (long at = 0; at < size; at += RECORD)
        {
            in.clear();
            while (in.hasRemaining() && file.read(in, at + in.position()) > 0)
            {
            }
            positions.addLong(in.getLong(0));
            ids.addLong(in.getLong(8));
        }
    }

    /**
     * The service starts from the snapshot at {@code snapshotPosition} (-1: none, the whole log is
     * applied again): keeps what the snapshot covers, drops what the replay applies again.
     */
    synchronized void restart(final long snapshotPosition) throws IOException
    {
        int keep = 0;
        knownFrom = 0;
        if (snapshotPosition >= 0)
        {
            keep = -1;
            for (int i = positions.size() - 1; i >= 0 && keep < 0; i--)
            {
                if (positions.getLong(i) == -snapshotPosition - 1)
                {
                    keep = i + 1;
                }
            }
            if (keep < 0)
            {
                // No marker: what the file holds up to the snapshot is kept, but may be incomplete.
                keep = 0;
                while (keep < positions.size() && position(positions.getLong(keep)) <= snapshotPosition)
                {
                    keep++;
                }
                knownFrom = snapshotPosition;
            }
        }
        while (positions.size() > keep)
        {
            positions.removeAt(positions.size() - 1);
            ids.removeAt(ids.size() - 1);
        }
        file.truncate((long)keep * RECORD);
        file.position((long)keep * RECORD);
    }

    private static long position(final long recorded)
    {
        return recorded >= 0 ? recorded : -recorded - 1;
    }

    /** A snapshot taken at {@code position}: marked and forced, with everything before it. */
    void snapshot(final long position) throws IOException
    {
        applied(-position - 1, 0);
        flush();
        file.force(false);
    }

    /** The service applied the message with {@code id} at {@code position}; written by {@link #flush}. */
    void applied(final long position, final long id) throws IOException
    {
        if (buf.remaining() < RECORD)
        {
            flush();
        }
        buf.putLong(position).putLong(id);
        synchronized (this)
        {
            positions.addLong(position);
            ids.addLong(id);
        }
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
    long[][] ranges()
    {
        final long[] a;
        synchronized (this)
        {
            int n = 0;
            a = new long[ids.size()];
            for (int i = 0; i < ids.size(); i++)
            {
                if (positions.getLong(i) >= 0)
                {
                    a[n++] = ids.getLong(i) ^ Long.MIN_VALUE; // unsigned order as signed
                }
            }
            return merge(Arrays.copyOf(a, n));
        }
    }

    private static long[][] merge(final long[] flipped)
    {
        Arrays.sort(flipped);
        final LongArrayList lo = new LongArrayList();
        final LongArrayList hi = new LongArrayList();
        for (final long f : flipped)
        {
            final long v = f ^ Long.MIN_VALUE;
            if (hi.size() > 0 && (v == hi.getLong(hi.size() - 1) || v == hi.getLong(hi.size() - 1) + 1))
            {
                hi.setLong(hi.size() - 1, v);
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
