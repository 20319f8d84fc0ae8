package dev.rig.aeron.matching;

import java.util.Map;
import java.util.TreeMap;

/**
 * The ids of the single orders the service accepted since it started or restored, as disjoint,
 * non-adjacent closed ranges (a load generator's ids are sequential per stream, so a run takes a
 * few ranges): what GET /orders reports for rig's lost-order check (engine.HeldOrders), as the
 * reference engine keeps them (engine/replica/held.go). Service thread only.
 */
final class HeldIds
{
    private final TreeMap<Long, Long> ranges = new TreeMap<>(Long::compareUnsigned);

    void add(final long id)
    {
        final Map.Entry<Long, Long> left = ranges.floorEntry(id);
        if (left != null && Long.compareUnsigned(id, left.getValue()) <= 0)
        {
            return; // held already
        }
        long lo = id;
        long hi = id;
        if (left != null && left.getValue() + 1 == id && id != 0)
        {
            lo = left.getKey();
        }
        final Long right = id == -1L ? null : ranges.get(id + 1);
        if (right != null)
        {
            hi = right;
            ranges.remove(id + 1);
        }
        ranges.put(lo, hi);
    }

    void clear()
    {
        ranges.clear();
    }

    /** The ranges as {lo, hi} pairs, ascending. */
    long[][] toArray()
    {
        final long[][] out = new long[ranges.size()][];
        int i = 0;
        for (final Map.Entry<Long, Long> e : ranges.entrySet())
        {
            out[i++] = new long[] {e.getKey(), e.getValue()};
        }
        return out;
    }
}
