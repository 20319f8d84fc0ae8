package dev.rig.aeron.matching;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Checks of the book and the snapshot format that need no cluster, run by
 * examples/aeron-cluster/aeron_test.go (java -cp ... dev.rig.aeron.SelfTest). Prints one line per
 * check and exits 1 if any failed.
 */
public final class SelfTest
{
    private static int failed;

    private SelfTest()
    {
    }

    private static void check(final String name, final boolean ok, final String seen)
    {
        System.out.println((ok ? "pass " : "FAIL ") + name + ": " + seen);
        if (!ok)
        {
            failed++;
        }
    }

    /** A book of n GTC orders on both sides of each instrument, some crossing. */
    static OrderBook book(final int n, final long seed)
    {
        final OrderBook b = new OrderBook();
        final Random r = new Random(seed);
        final OrderBook.Result res = new OrderBook.Result();
        for (int i = 0; i < n; i++)
        {
            final byte side = (byte)r.nextInt(2);
            b.submit(i + 1, r.nextInt(4), side, OrderBook.GTC, false, 1000 + (side == 0 ? -1 : 1) * r.nextInt(50) + r.nextInt(3) - 1,
                1 + r.nextInt(100), res);
        }
        return b;
    }

    static List<byte[]> records(final OrderBook b, final int maxPayload)
    {
        final List<byte[]> out = new ArrayList<>();
        SnapshotCodec.write(b, 4242, maxPayload, (buf, len) ->
        {
            final byte[] copy = new byte[len];
            buf.getBytes(0, copy);
            out.add(copy);
        });
        return out;
    }

    /** Restores records into a new book; the refusal's message, or null when it restored. */
    static String restore(final List<byte[]> recs, final OrderBook into)
    {
        final SnapshotCodec.Restore r = new SnapshotCodec.Restore(into);
        try
        {
            for (final byte[] rec : recs)
            {
                r.record(new UnsafeBuffer(rec), 0, rec.length);
            }
            r.finish();
            return null;
        }
        catch (final IllegalStateException e)
        {
            return e.getMessage();
        }
    }

    public static void main(final String[] args)
    {
        // The book: price-time priority and the reference engine's rules.
        final OrderBook b = new OrderBook();
        final OrderBook.Result res = new OrderBook.Result();
        b.submit(1, 7, OrderBook.SELL, OrderBook.GTC, false, 101, 5, res);
        b.submit(2, 7, OrderBook.SELL, OrderBook.GTC, false, 100, 5, res);
        b.submit(3, 7, OrderBook.SELL, OrderBook.GTC, false, 100, 5, res);
        b.submit(4, 7, OrderBook.BUY, OrderBook.IOC, false, 100, 7, res);
        check("IOC buy takes the best price in time order and drops its rest", res.filled == 7 && res.rested == 0 && b.orders() == 2,
            "filled " + res.filled + " rested " + res.rested + " orders " + b.orders());
        b.submit(5, 7, OrderBook.BUY, OrderBook.GTC, false, 99, 3, res);
        check("GTC limit that crosses nothing rests", res.filled == 0 && res.rested == 3, "filled " + res.filled + " rested " + res.rested);
        b.submit(5, 7, OrderBook.BUY, OrderBook.GTC, false, 98, 1, res);
        check("duplicate resting id is rejected", res.reject != null && res.reject.startsWith("duplicate order id"), String.valueOf(res.reject));
        b.submit(6, 7, OrderBook.BUY, OrderBook.GTC, false, 98, 0, res);
        check("zero quantity is rejected", res.reject != null && res.reject.startsWith("bad order"), String.valueOf(res.reject));
        b.submit(7, 7, OrderBook.BUY, OrderBook.IOC, true, 0, 100, res);
        check("market order sweeps every level and never rests", res.filled == 8 && res.rested == 0 && b.orders() == 1,
            "filled " + res.filled + " orders " + b.orders());
        check("cancel of an unknown id is refused", b.cancel(99) != null, String.valueOf(b.cancel(99)));
        check("cancel of a resting id", b.cancel(5) == null && b.orders() == 0, "orders " + b.orders());

        // The hash: equal books hash alike, a different book does not.
        final OrderBook x = book(20_000, 1);
        final OrderBook y = book(20_000, 1);
        final OrderBook z = book(20_000, 2);
        check("same commands, same hash", x.stateHash() == y.stateHash(), String.format("%016x %016x", x.stateHash(), y.stateHash()));
        check("other commands, other hash", x.stateHash() != z.stateHash(), String.format("%016x %016x", x.stateHash(), z.stateHash()));

        // Snapshots: records within the max payload, a whole image restores the same book.
        final int max = 1376; // the IPC snapshot publication's max payload at the default MTU
        final List<byte[]> recs = records(x, max);
        int longest = 0;
        for (final byte[] r : recs)
        {
            longest = Math.max(longest, r.length);
        }
        check("every record fits the max payload", longest <= max && recs.size() > 2, recs.size() + " records, longest " + longest);
        final OrderBook back = new OrderBook();
        final String whole = restore(recs, back);
        check("whole image restores the same book", whole == null && back.stateHash() == x.stateHash() && back.orders() == x.orders(),
            String.format("%s; %d orders, hash %016x (want %016x)", whole, back.orders(), back.stateHash(), x.stateHash()));
        // ... and the restored book orders in the same time priority (matching gives the same fills).
        final OrderBook.Result r1 = new OrderBook.Result();
        final OrderBook.Result r2 = new OrderBook.Result();
        x.submit(1_000_000, 0, OrderBook.BUY, OrderBook.IOC, true, 0, 5_000, r1);
        back.submit(1_000_000, 0, OrderBook.BUY, OrderBook.IOC, true, 0, 5_000, r2);
        check("restored book keeps time priority", r1.filled == r2.filled && x.stateHash() == back.stateHash(),
            String.format("filled %d / %d, hash %016x / %016x", r1.filled, r2.filled, x.stateHash(), back.stateHash()));

        // Partial or inconsistent images are refused.
        final List<byte[]> noEnd = new ArrayList<>(recs.subList(0, recs.size() - 1));
        final String e1 = restore(noEnd, new OrderBook());
        check("image without END is refused as partial", e1 != null && e1.contains("partial"), String.valueOf(e1));
        final List<byte[]> lostBatch = new ArrayList<>(recs);
        lostBatch.remove(recs.size() / 2);
        final String e2 = restore(lostBatch, new OrderBook());
        check("image missing a BATCH is refused", e2 != null && e2.startsWith("END record says"), String.valueOf(e2));
        final List<byte[]> noBegin = new ArrayList<>(recs.subList(1, recs.size()));
        final String e3 = restore(noBegin, new OrderBook());
        check("image without BEGIN is refused", e3 != null && e3.contains("want BEGIN"), String.valueOf(e3));
        final List<byte[]> flipped = new ArrayList<>(recs);
        final byte[] mid = flipped.get(1).clone();
        mid[mid.length - 8] ^= 1; // the low byte of the last order's qty
        flipped.set(1, mid);
        final String e4 = restore(flipped, new OrderBook());
        check("image with a changed order is refused by the hash", e4 != null && e4.contains("hash"), String.valueOf(e4));

        // Held order ids: ranges merge as ids fill the gaps between them; a repeat changes nothing.
        final HeldIds held = new HeldIds();
        for (final long id : new long[] {1, 2, 3, 5, 10, 4, 3, 11, 7})
        {
            held.add(id);
        }
        final String ranges = java.util.Arrays.deepToString(held.toArray());
        check("held ids as merged closed ranges", ranges.equals("[[1, 5], [7, 7], [10, 11]]"), ranges);

        System.out.println(failed == 0 ? "ok" : failed + " check(s) failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
