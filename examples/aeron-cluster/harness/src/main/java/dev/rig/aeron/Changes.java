package dev.rig.aeron;

import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * GET /changes?since=V&wait=D (engine.Changes, engine/contract.go): the node's status at every
 * change of what the agent follows (phase, role, leader, term, last snapshot) and of Aeron's
 * election state, a version per change, oldest first. Each change happened in (prev_check, now]
 * on the node's clock. Admin's watcher checks the node at once when the consensus module's
 * counters move (ChangeSignal) or the service reports a role or leadership term
 * (NodeState.changed), and every millisecond while an election is open (WatchPace), so no election
 * state that lasts longer than a wake is missed, where the agent's 20 ms status poll missed a
 * candidate state and a follower that went straight to leader.
 */
final class Changes
{
    /** The newest changes kept: a long poll that fell further behind gets truncated=true. */
    static final int KEPT = 256;
    /** The longest wait a long poll may ask for (engine.MaxChangesWait). */
    static final long MAX_WAIT_NS = 60_000_000_000L;

    private record Change(long version, Instant prevCheck, String status)
    {
    }

    private final ArrayDeque<Change> list = new ArrayDeque<>();
    private long version;
    private Object key;
    private Instant lastCheck;
    private boolean closed;

    /**
     * Records a check of the node: a new version when key differs from the last check's (or it is
     * the first). status renders the node's status for that key, and is called only then.
     */
    synchronized boolean check(final Object key, final Instant now, final java.util.function.Supplier<String> status)
    {
        boolean changed = false;
        if (version == 0 || !key.equals(this.key))
        {
            version++;
            list.addLast(new Change(version, lastCheck, status.get()));
            while (list.size() > KEPT)
            {
                list.removeFirst();
            }
            this.key = key;
            notifyAll();
            changed = true;
        }
        lastCheck = now;
        return changed;
    }

    /** Wakes every long poll, which then answers with what it has (the node is stopping). */
    synchronized void close()
    {
        closed = true;
        notifyAll();
    }

    /**
     * The JSON answer for since, waiting up to waitNs for a change after it. A since newer than the
     * latest version (an earlier process's) starts over from the oldest change kept.
     */
    synchronized String since(final long since, final long waitNs) throws InterruptedException
    {
        final long deadline = System.nanoTime() + waitNs;
        long from = since > version ? 0 : since;
        while (version <= from && !closed)
        {
            final long left = deadline - System.nanoTime();
            if (left <= 0)
            {
                break;
            }
            wait(Math.max(1, left / 1_000_000), (int)(left % 1_000_000));
            if (since > version)
            {
                from = 0;
            }
        }
        final List<Change> out = new ArrayList<>();
        for (final Change c : list)
        {
            if (c.version() > from)
            {
                out.add(c);
            }
        }
        final StringBuilder sb = new StringBuilder(256 + out.size() * 2048).append('{');
        Json.field(sb, "version", version);
        sb.append("\"changes\":[");
        for (int i = 0; i < out.size(); i++)
        {
            final Change c = out.get(i);
            sb.append(i > 0 ? ",{" : "{");
            Json.field(sb, "version", c.version());
            if (c.prevCheck() != null)
            {
                Json.field(sb, "prev_check", c.prevCheck().toString());
            }
            sb.append("\"status\":").append(c.status()).append('}');
        }
        sb.append("],");
        Json.field(sb, "truncated", !out.isEmpty() && out.get(0).version() > from + 1);
        Json.close(sb);
        return sb.toString();
    }

    /**
     * A Go duration as text (time.ParseDuration's forms: "10s", "1m0s", "1.5s", "250ms", "0"), in
     * nanoseconds; IllegalArgumentException when it is not one.
     */
    static long parseGoDuration(final String s)
    {
        if (s.equals("0"))
        {
            return 0;
        }
        if (s.isEmpty() || s.startsWith("-"))
        {
            throw new IllegalArgumentException("not a Go duration from 0: " + s);
        }
        double total = 0;
        int i = s.startsWith("+") ? 1 : 0;
        if (i == s.length())
        {
            throw new IllegalArgumentException("not a Go duration: " + s);
        }
        while (i < s.length())
        {
            final int start = i;
            while (i < s.length() && (Character.isDigit(s.charAt(i)) || s.charAt(i) == '.'))
            {
                i++;
            }
            if (start == i)
            {
                throw new IllegalArgumentException("not a Go duration: " + s);
            }
            final double n = Double.parseDouble(s.substring(start, i));
            final int u = i;
            while (i < s.length() && !Character.isDigit(s.charAt(i)) && s.charAt(i) != '.')
            {
                i++;
            }
            final long unit = switch (s.substring(u, i))
            {
                case "ns" -> 1L;
                case "us", "µs", "μs" -> 1_000L;
                case "ms" -> 1_000_000L;
                case "s" -> 1_000_000_000L;
                case "m" -> 60_000_000_000L;
                case "h" -> 3_600_000_000_000L;
                default -> throw new IllegalArgumentException("not a Go duration (unit " + s.substring(u, i) + "): " + s);
            };
            total += n * unit;
        }
        return (long)total;
    }
}
