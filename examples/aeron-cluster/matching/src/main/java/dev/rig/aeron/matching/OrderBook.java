package dev.rig.aeron.matching;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * A price-time order book over many instruments: limit (GTC, IOC) and market orders, cancel.
 * Deterministic: the same commands in the same order give the same book and the same
 * {@link #stateHash()}, which is the reference engine's (engine/book/book.go StateHash): a
 * splitmix64 chain over the resting orders in walk order (instruments by ascending unsigned id,
 * buy side before sell, levels best first, orders in time priority). So a book built from the
 * same commands hashes alike in this engine and in rig's own.
 *
 * Not thread safe: only the clustered service thread touches it.
 */
final class OrderBook
{
    static final byte BUY = 0;
    static final byte SELL = 1;
    static final byte GTC = 0;
    static final byte IOC = 1;

    /** A resting order: a node of its level's doubly linked time-priority queue. */
    static final class Order
    {
        final long id;
        final long instrument; // unsigned u32 held in a long
        final byte side;
        final long price;
        long qty;
        Level level;
        Order prev;
        Order next;

        Order(final long id, final long instrument, final byte side, final long price, final long qty)
        {
            this.id = id;
            this.instrument = instrument;
            this.side = side;
            this.price = price;
            this.qty = qty;
        }
    }

    static final class Level
    {
        final long price;
        Order head;
        Order tail;
        int count;

        Level(final long price)
        {
            this.price = price;
        }

        void append(final Order o)
        {
            o.level = this;
            o.prev = tail;
            if (tail == null)
            {
                head = o;
            }
            else
            {
                tail.next = o;
            }
            tail = o;
            count++;
        }

        void remove(final Order o)
        {
            if (o.prev == null)
            {
                head = o.next;
            }
            else
            {
                o.prev.next = o.next;
            }
            if (o.next == null)
            {
                tail = o.prev;
            }
            else
            {
                o.next.prev = o.prev;
            }
            o.prev = o.next = null;
            o.level = null;
            count--;
        }
    }

    static final class Instrument
    {
        // Best first: bids by descending price, asks by ascending.
        final TreeMap<Long, Level> bids = new TreeMap<>((a, b) -> Long.compare(b, a));
        final TreeMap<Long, Level> asks = new TreeMap<>();

        TreeMap<Long, Level> side(final byte side)
        {
            return side == BUY ? bids : asks;
        }
    }

    /** Outcome of one submit: quantity traded and quantity left resting; reject is null when accepted. */
    static final class Result
    {
        long filled;
        long rested;
        String reject;
    }

    private final TreeMap<Long, Instrument> instruments = new TreeMap<>();
    private final Map<Long, Order> byId = new HashMap<>();
    private long version;
    private long hashVersion = -1;
    private long hashValue;

    int orders()
    {
        return byId.size();
    }

    /** Validates, matches and rests o as engine/book/book.go's Submit does; the book is unchanged on reject. */
    void submit(
        final long id, final long instrument, final byte side, final byte tif, final boolean market,
        final long price, final long qty, final Result out)
    {
        out.filled = 0;
        out.rested = 0;
        out.reject = null;
        if (qty <= 0)
        {
            out.reject = "bad order: order " + Long.toUnsignedString(id) + ": qty " + qty + ", want > 0";
            return;
        }
        if (side != BUY && side != SELL)
        {
            out.reject = "bad order: order " + Long.toUnsignedString(id) + ": side " + side + ", want 0 (buy) or 1 (sell)";
            return;
        }
        if (tif != GTC && tif != IOC)
        {
            out.reject = "bad order: order " + Long.toUnsignedString(id) + ": tif " + tif + ", want 0 (GTC) or 1 (IOC)";
            return;
        }
        if (byId.containsKey(id))
        {
            out.reject = "duplicate order id: order " + Long.toUnsignedString(id) + " is already resting";
            return;
        }
        Instrument inst = instruments.get(instrument);
        long rem = qty;
        if (inst != null)
        {
            rem = match(inst, side, market, price, rem);
        }
        out.filled = qty - rem;
        if (rem > 0 && !market && tif == GTC)
        {
            if (inst == null)
            {
                inst = new Instrument();
                instruments.put(instrument, inst);
            }
            rest(inst, new Order(id, instrument, side, price, rem));
            out.rested = rem;
        }
    }

    private long match(final Instrument inst, final byte side, final boolean market, final long price, final long qty)
    {
        long rem = qty;
        final TreeMap<Long, Level> opposite = inst.side(side == BUY ? SELL : BUY);
        while (rem > 0 && !opposite.isEmpty())
        {
            final Level lv = opposite.firstEntry().getValue();
            if (!market && ((side == BUY && lv.price > price) || (side == SELL && lv.price < price)))
            {
                break;
            }
            version++;
            while (rem > 0 && lv.head != null)
            {
                final Order r = lv.head;
                final long q = Math.min(rem, r.qty);
                r.qty -= q;
                rem -= q;
                if (r.qty == 0)
                {
                    lv.remove(r);
                    byId.remove(r.id);
                }
            }
            if (lv.head == null)
            {
                opposite.remove(lv.price);
            }
        }
        return rem;
    }

    private void rest(final Instrument inst, final Order o)
    {
        version++;
        inst.side(o.side).computeIfAbsent(o.price, Level::new).append(o);
        byId.put(o.id, o);
    }

    /** Puts a restored order back at the tail of its level: restore walks in time priority. */
    void restore(final long id, final long instrument, final byte side, final long price, final long qty)
    {
        if (qty <= 0 || (side != BUY && side != SELL) || byId.containsKey(id))
        {
            throw new IllegalStateException("snapshot order " + Long.toUnsignedString(id) + " is not a valid resting order");
        }
        rest(instruments.computeIfAbsent(instrument, k -> new Instrument()), new Order(id, instrument, side, price, qty));
    }

    /** Cancels a resting order; the reason when there is none, else null. */
    String cancel(final long id)
    {
        final Order o = byId.remove(id);
        if (o == null)
        {
            return "unknown order: " + Long.toUnsignedString(id) + " is not resting";
        }
        version++;
        final Level lv = o.level;
        lv.remove(o);
        if (lv.head == null)
        {
            final Instrument inst = instruments.get(o.instrument);
            inst.side(o.side).remove(lv.price);
            if (inst.bids.isEmpty() && inst.asks.isEmpty())
            {
                instruments.remove(o.instrument);
            }
        }
        return null;
    }

    /** Visitor of the resting orders in walk order. */
    interface Walker
    {
        void order(long instrument, byte side, long price, long id, long qty);
    }

    void walk(final Walker w)
    {
        for (final Map.Entry<Long, Instrument> e : instruments.entrySet())
        {
            final Instrument inst = e.getValue();
            for (byte side = BUY; side <= SELL; side++)
            {
                for (final Level lv : inst.side(side).values())
                {
                    for (Order o = lv.head; o != null; o = o.next)
                    {
                        w.order(e.getKey(), side, lv.price, o.id, o.qty);
                    }
                }
            }
        }
    }

    /** engine/book/book.go's StateHash, cached until the next change. */
    long stateHash()
    {
        if (hashVersion == version)
        {
            return hashValue;
        }
        final long[] h = {0x9e3779b97f4a7c15L ^ byId.size()};
        walk((instrument, side, price, id, qty) ->
        {
            final long tag = mix64(instrument << 1 | side) ^ price;
            h[0] = mix64(h[0] ^ tag ^ id * 0xbf58476d1ce4e5b9L ^ qty << 17);
        });
        hashVersion = version;
        hashValue = h[0];
        return hashValue;
    }

    /** The splitmix64 finalizer. */
    static long mix64(long x)
    {
        x ^= x >>> 30;
        x *= 0xbf58476d1ce4e5b9L;
        x ^= x >>> 27;
        x *= 0x94d049bb133111ebL;
        x ^= x >>> 31;
        return x;
    }
}
