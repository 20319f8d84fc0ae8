package dev.rig.aeron.matching;

import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The service's snapshot format: a BEGIN record, BATCH records of whole orders, an END record,
 * each at most the snapshot publication's max payload, so Aeron never fragments one and no offer
 * is larger than a frame. Little-endian.
 *
 * <pre>
 * BEGIN  kind=1 u8, version=1 u8, pad 6, orders i64, log position i64            (24 bytes)
 * BATCH  kind=2 u8, pad u8, count u16, count x {id i64, instrument u32, side u8, price i64, qty i64}
 * END    kind=3 u8, pad 3, records i32 (BEGIN and END included), orders i64, state hash i64
 * </pre>
 *
 * Restore refuses an image that is not whole: no BEGIN first, a BATCH whose length does not
 * match its count, an END whose record or order count differs from what was read, a state hash
 * that differs from the restored book's, or an image that ends before END.
 */
final class SnapshotCodec
{
    static final byte BEGIN = 1;
    static final byte BATCH = 2;
    static final byte END = 3;
    static final byte VERSION = 1;
    static final int ORDER_LEN = 29;
    static final int BATCH_HEADER = 4;
    static final int FIXED_RECORD = 24;

    /** Where the records go: the snapshot publication, or a test's list. */
    interface Sink
    {
        void put(UnsafeBuffer b, int len);
    }

    /** What a write or a restore counted. */
    static final class Counts
    {
        long records;
        long bytes;
        long orders;
    }

    private SnapshotCodec()
    {
    }

    static Counts write(final OrderBook book, final long logPosition, final int maxPayload, final Sink sink)
    {
        if (maxPayload < BATCH_HEADER + ORDER_LEN || maxPayload < FIXED_RECORD)
        {
            throw new IllegalArgumentException("max payload " + maxPayload + " cannot hold one order record");
        }
        final Counts c = new Counts();
        final int perBatch = Math.min(0xffff, (maxPayload - BATCH_HEADER) / ORDER_LEN);
        final UnsafeBuffer chunk = new UnsafeBuffer(new byte[maxPayload]);

        chunk.setMemory(0, FIXED_RECORD, (byte)0);
        chunk.putByte(0, BEGIN);
        chunk.putByte(1, VERSION);
        chunk.putLong(8, book.orders());
        chunk.putLong(16, logPosition);
        emit(sink, chunk, FIXED_RECORD, c);

        final int[] n = {0};
        book.walk((instrument, side, price, id, qty) ->
        {
            final int p = BATCH_HEADER + n[0] * ORDER_LEN;
            chunk.putLong(p, id);
            chunk.putInt(p + 8, (int)instrument);
            chunk.putByte(p + 12, side);
            chunk.putLong(p + 13, price);
            chunk.putLong(p + 21, qty);
            c.orders++;
            if (++n[0] == perBatch)
            {
                batch(sink, chunk, n, c);
            }
        });
        batch(sink, chunk, n, c);

        chunk.setMemory(0, FIXED_RECORD, (byte)0);
        chunk.putByte(0, END);
        chunk.putInt(4, (int)c.records + 1);
        chunk.putLong(8, book.orders());
        chunk.putLong(16, book.stateHash());
        emit(sink, chunk, FIXED_RECORD, c);
        return c;
    }

    private static void batch(final Sink sink, final UnsafeBuffer chunk, final int[] n, final Counts c)
    {
        if (n[0] == 0)
        {
            return;
        }
        chunk.putByte(0, BATCH);
        chunk.putByte(1, (byte)0);
        chunk.putShort(2, (short)n[0]);
        emit(sink, chunk, BATCH_HEADER + n[0] * ORDER_LEN, c);
        n[0] = 0;
    }

    private static void emit(final Sink sink, final UnsafeBuffer chunk, final int len, final Counts c)
    {
        sink.put(chunk, len);
        c.records++;
        c.bytes += len;
    }

    /** Reads records into an empty book; {@link #finish()} says whether the image was whole. */
    static final class Restore
    {
        private final OrderBook book;
        final Counts counts = new Counts();
        long wantOrders = -1;
        long logPosition;
        boolean ended;

        Restore(final OrderBook book)
        {
            this.book = book;
        }

        void record(final DirectBuffer b, final int off, final int len)
        {
            if (ended)
            {
                throw new IllegalStateException("record after END");
            }
            counts.records++;
            counts.bytes += len;
            final byte kind = b.getByte(off);
            if (wantOrders < 0 && kind != BEGIN)
            {
                throw new IllegalStateException("snapshot starts with record kind " + kind + ", want BEGIN (" + BEGIN + ")");
            }
            switch (kind)
            {
                case BEGIN:
                    if (wantOrders >= 0)
                    {
                        throw new IllegalStateException("second BEGIN record in a snapshot");
                    }
                    if (len != FIXED_RECORD || b.getByte(off + 1) != VERSION)
                    {
                        throw new IllegalStateException("BEGIN of " + len + " bytes, version " + b.getByte(off + 1) + "; want 24 bytes, version " + VERSION);
                    }
                    wantOrders = b.getLong(off + 8);
                    logPosition = b.getLong(off + 16);
                    break;
                case BATCH:
                    final int count = b.getShort(off + 2) & 0xffff;
                    if (len != BATCH_HEADER + count * ORDER_LEN)
                    {
                        throw new IllegalStateException("BATCH record of " + len + " bytes for " + count + " orders");
                    }
                    int p = off + BATCH_HEADER;
                    for (int i = 0; i < count; i++, p += ORDER_LEN)
                    {
                        book.restore(b.getLong(p), b.getInt(p + 8) & 0xffffffffL, b.getByte(p + 12), b.getLong(p + 13), b.getLong(p + 21));
                    }
                    counts.orders += count;
                    break;
                case END:
                    final int records = b.getInt(off + 4);
                    final long orders = b.getLong(off + 8);
                    final long hash = b.getLong(off + 16);
                    if (orders != counts.orders || orders != wantOrders || records != counts.records)
                    {
                        throw new IllegalStateException("END record says " + orders + " orders in " + records + " records; read " +
                            counts.orders + " orders in " + counts.records + " records, BEGIN said " + wantOrders + " orders");
                    }
                    if (hash != book.stateHash())
                    {
                        throw new IllegalStateException(String.format("END record hash %016x, the restored book hashes %016x", hash, book.stateHash()));
                    }
                    ended = true;
                    break;
                default:
                    throw new IllegalStateException("unknown snapshot record kind " + kind);
            }
        }

        /** Called when the image has ended: refuses a partial one. */
        void finish()
        {
            if (!ended)
            {
                throw new IllegalStateException("snapshot image ended after " + counts.records + " records and " + counts.orders +
                    " orders, before its END record (BEGIN said " + wantOrders + " orders): a partial image");
            }
        }
    }
}
