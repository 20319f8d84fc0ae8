package dev.rig.aeron;

import io.aeron.AeronCounters;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.status.CountersReader;

/**
 * Aeron's duty-cycle stall counters, sampled through the whole run: every agent's max cycle time
 * and cycle-time-threshold-exceeded count (the media driver's conductor, sender and receiver, the
 * consensus module, the clustered service container, the archive's conductor, recorder and
 * replayer), read from the counters file as AeronStat reads them. The reads ride on the consensus
 * module's duty cycle (Host: its idle strategy, called once a cycle, which wakes at least every
 * millisecond when idle), at most one per interval: a thread of their own woke 50 times a second
 * for them, and the wake-up, not the read, was nearly all of their cost. Where the consensus module
 * has no runner of its own (an agent invoker), a thread of their own reads them. A host's long cycle
 * delays the reads behind it: the spans then widen to cover it (every place a stall can lie still). A line
 * goes to the node's always-on pauses file (rundir.PausesFile, one rundir.InsideSpan each, kind
 * duty_cycle, source aeron_counters) only when an agent's max grew or its count rose in an interval.
 *
 * What a line claims, and no more: a max that grew between two reads is a real cycle of that length
 * that ended between them; a count that rose by k says k cycles each longer than the threshold ended
 * between them, which bounds their time from below only (k × threshold). Where in the interval a
 * cycle ended is not known, so the span is every place the held time can lie — from the previous
 * read less the claimed cycle's length to this read — with share held / span (rundir's sampled
 * spans: spread evenly over it). The interval is short beside the stalls worth naming for that
 * reason: at 100 ms a 50 ms stall would be spread to a third and could never cover half an excursion.
 */
final class DutyCycles implements AutoCloseable
{
    static final String KIND = "duty_cycle";
    static final String SOURCE = "aeron_counters";
    static final String INTERVAL_PROP = "rig.duty.cycle.interval";
    static final long DEFAULT_INTERVAL_NS = TimeUnit.MILLISECONDS.toNanos(20);
    /** Samples between scans of the counters file for agents (counters come and go with them). */
    static final int RESCAN_EVERY = 50;

    /** One agent's pair of counters: ids in the counters file, and the threshold its count is over. */
    record Agent(String name, int maxId, int exceededId, long thresholdNs)
    {
    }

    private static final Pattern THRESHOLD = Pattern.compile("threshold=(\\d+)(ns|us|ms|s)\\b");

    private final CountersReader cr;
    private final OutputStream out;
    private final long epochBaseNs;
    private final long monoBaseNs;
    private List<Agent> agents = List.of();
    private long[] lastMax = new long[0];
    private long[] lastExceeded = new long[0];
    private long lastNs;
    private int samples;
    private volatile boolean running = true;
    private Thread thread;
    private final long intervalNs;
    /** Held by the one read under way: hosts on several threads never read at once. */
    private final AtomicBoolean reading = new AtomicBoolean();
    private volatile long nextReadNs = Long.MIN_VALUE;

    DutyCycles(final CountersReader cr, final OutputStream out)
    {
        this(cr, out, DEFAULT_INTERVAL_NS);
    }

    DutyCycles(final CountersReader cr, final OutputStream out, final long intervalNs)
    {
        this.cr = cr;
        this.out = out;
        this.intervalNs = intervalNs;
        this.monoBaseNs = System.nanoTime();
        this.epochBaseNs = BurstProbe.epochNanos();
    }

    /** A sampler appending to pausesFile, read by poll (a Host's) until it is closed. */
    static DutyCycles open(final CountersReader cr, final File pausesFile, final long intervalNs) throws IOException
    {
        return new DutyCycles(cr, new FileOutputStream(pausesFile, true), intervalNs);
    }

    /** Samples cr every interval on a daemon thread of its own, appending to pausesFile. */
    static DutyCycles start(final CountersReader cr, final File pausesFile, final long intervalNs) throws IOException
    {
        return open(cr, pausesFile, intervalNs).startThread();
    }

    /** Reads on a thread of its own, for where no Host took the sampler. */
    DutyCycles startThread()
    {
        thread = new Thread(() -> loop(intervalNs), "rig-duty-cycles");
        thread.setDaemon(true);
        thread.start();
        return this;
    }

    /**
     * A read if one is due at monoNs (System.nanoTime's clock): at most one per interval, whichever
     * host thread comes first; the others return at once. A failed read stops the sampler.
     */
    void poll(final long monoNs)
    {
        if (monoNs < nextReadNs || !running || !reading.compareAndSet(false, true))
        {
            return;
        }
        try
        {
            if (monoNs >= nextReadNs)
            {
                nextReadNs = monoNs + intervalNs;
                sample(epochNs(monoNs));
            }
        }
        catch (final RuntimeException | IOException e)
        {
            running = false;
            Log.error("duty-cycle sampler stopped", e);
        }
        finally
        {
            reading.set(false);
        }
    }

    /**
     * Where the reads ride: an idle strategy wrapped round an agent's, calling poll from the
     * agent's own thread once a duty cycle. An idle cycle (no work) checks the clock every time; a
     * busy one every BUSY_CHECK_EVERY cycles, so a spinning agent does not pay a clock read a cycle
     * and still reads within that many cycles of the interval.
     */
    static final class Host
    {
        static final int BUSY_CHECK_EVERY = 256;
        private final LongSupplier clock;
        private volatile DutyCycles sampler;
        private volatile boolean hosting;

        Host()
        {
            this(System::nanoTime);
        }

        Host(final LongSupplier clock)
        {
            this.clock = clock;
        }

        /** base's idle strategies, each wrapped to carry the reads. */
        Supplier<IdleStrategy> wrap(final Supplier<IdleStrategy> base)
        {
            return () ->
            {
                hosting = true;
                return new Idle(base.get(), this);
            };
        }

        /** Whether an agent took an idle strategy from wrap (its runner asks for one at launch). */
        boolean hosting()
        {
            return hosting;
        }

        /** From here on the hosts' cycles read d's counters. */
        void attach(final DutyCycles d)
        {
            sampler = d;
        }

        void poll()
        {
            final DutyCycles d = sampler;
            if (d != null)
            {
                d.poll(clock.getAsLong());
            }
        }
    }

    private static final class Idle implements IdleStrategy
    {
        private final IdleStrategy delegate;
        private final Host host;
        private int busy;

        Idle(final IdleStrategy delegate, final Host host)
        {
            this.delegate = delegate;
            this.host = host;
        }

        @Override
        public void idle(final int workCount)
        {
            if (workCount <= 0 || ++busy % Host.BUSY_CHECK_EVERY == 0)
            {
                host.poll();
            }
            delegate.idle(workCount);
        }

        @Override
        public void idle()
        {
            host.poll();
            delegate.idle();
        }

        @Override
        public void reset()
        {
            delegate.reset();
        }

        @Override
        public String alias()
        {
            return delegate.alias();
        }
    }

    /** The sampling interval: INTERVAL_PROP (a duration, e.g. 20ms) or the default. */
    static long intervalNs()
    {
        final String v = System.getProperty(INTERVAL_PROP);
        if (v == null)
        {
            return DEFAULT_INTERVAL_NS;
        }
        final String want = "-D" + INTERVAL_PROP + "=" + v + ": want a duration of at least 1ms (ns, us, ms or s), e.g. 20ms";
        final long ns;
        try
        {
            ns = parseDuration(v.trim());
        }
        catch (final IllegalArgumentException e)
        {
            throw new IllegalArgumentException(want);
        }
        if (ns < TimeUnit.MILLISECONDS.toNanos(1))
        {
            throw new IllegalArgumentException(want);
        }
        return ns;
    }

    private void loop(final long intervalNs)
    {
        while (running)
        {
            try
            {
                sample();
            }
            catch (final RuntimeException | IOException e)
            {
                Log.error("duty-cycle sampler stopped", e);
                return;
            }
            LockSupport.parkNanos(intervalNs);
        }
    }

    long nowEpochNs()
    {
        return epochNs(System.nanoTime());
    }

    /** A System.nanoTime reading as nanoseconds since the epoch. */
    long epochNs(final long monoNs)
    {
        return epochBaseNs + (monoNs - monoBaseNs);
    }

    /** One read of every agent's counters; a line for each that grew since the last read. */
    void sample() throws IOException
    {
        sample(nowEpochNs());
    }

    void sample(final long nowNs) throws IOException
    {
        if (samples++ % RESCAN_EVERY == 0 || !stillThere())
        {
            rescan();
        }
        for (int i = 0; i < agents.size(); i++)
        {
            final Agent a = agents.get(i);
            final long max = cr.getCounterValue(a.maxId);
            final long exceeded = cr.getCounterValue(a.exceededId);
            if (lastMax[i] >= 0 && (max > lastMax[i] || exceeded > lastExceeded[i]))
            {
                line(a, lastNs, nowNs, lastMax[i], max, exceeded - lastExceeded[i]);
            }
            lastMax[i] = max;
            lastExceeded[i] = exceeded;
        }
        lastNs = nowNs;
    }

    /** Whether every agent's counters are still the ones found (an agent closed frees them, and ids are reused). */
    private boolean stillThere()
    {
        for (final Agent a : agents)
        {
            if (cr.getCounterState(a.maxId) != CountersReader.RECORD_ALLOCATED ||
                cr.getCounterState(a.exceededId) != CountersReader.RECORD_ALLOCATED)
            {
                return false;
            }
        }
        return true;
    }

    /** Finds every agent's pair of counters; the ones already followed keep their last values. */
    private void rescan()
    {
        final List<Agent> found = find(cr);
        final long[] max = new long[found.size()];
        final long[] exceeded = new long[found.size()];
        for (int i = 0; i < found.size(); i++)
        {
            final int j = agents.indexOf(found.get(i));
            max[i] = j >= 0 ? lastMax[j] : -1; // new: its first read is the baseline
            exceeded[i] = j >= 0 ? lastExceeded[j] : 0;
        }
        agents = found;
        lastMax = max;
        lastExceeded = exceeded;
    }

    /** Every agent with both of its duty-cycle counters in cr, by Aeron's type ids (io.aeron.AeronCounters). */
    static List<Agent> find(final CountersReader cr)
    {
        final Map<String, int[]> ids = new LinkedHashMap<>();
        final Map<String, Long> thresholds = new LinkedHashMap<>();
        for (int id = 0; id <= cr.maxCounterId(); id++)
        {
            final int state = cr.getCounterState(id);
            if (state == CountersReader.RECORD_UNUSED)
            {
                break;
            }
            if (state != CountersReader.RECORD_ALLOCATED)
            {
                continue;
            }
            final int type = cr.getCounterTypeId(id);
            final String name;
            final boolean max;
            switch (type)
            {
                case AeronCounters.DRIVER_SYSTEM_COUNTER_TYPE_ID ->
                {
                    final int sys = cr.metaDataBuffer().getInt(CountersReader.metaDataOffset(id) + CountersReader.KEY_OFFSET);
                    switch (sys)
                    {
                        case AeronCounters.SYSTEM_COUNTER_ID_CONDUCTOR_MAX_CYCLE_TIME,
                            AeronCounters.SYSTEM_COUNTER_ID_CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED -> name = "driver-conductor";
                        case AeronCounters.SYSTEM_COUNTER_ID_SENDER_MAX_CYCLE_TIME,
                            AeronCounters.SYSTEM_COUNTER_ID_SENDER_CYCLE_TIME_THRESHOLD_EXCEEDED -> name = "driver-sender";
                        case AeronCounters.SYSTEM_COUNTER_ID_RECEIVER_MAX_CYCLE_TIME,
                            AeronCounters.SYSTEM_COUNTER_ID_RECEIVER_CYCLE_TIME_THRESHOLD_EXCEEDED -> name = "driver-receiver";
                        default ->
                        {
                            continue;
                        }
                    }
                    max = sys == AeronCounters.SYSTEM_COUNTER_ID_CONDUCTOR_MAX_CYCLE_TIME ||
                        sys == AeronCounters.SYSTEM_COUNTER_ID_SENDER_MAX_CYCLE_TIME ||
                        sys == AeronCounters.SYSTEM_COUNTER_ID_RECEIVER_MAX_CYCLE_TIME;
                }
                case AeronCounters.CLUSTER_MAX_CYCLE_TIME_TYPE_ID, AeronCounters.CLUSTER_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID ->
                {
                    name = "consensus-module";
                    max = type == AeronCounters.CLUSTER_MAX_CYCLE_TIME_TYPE_ID;
                }
                case AeronCounters.CLUSTER_CLUSTERED_SERVICE_MAX_CYCLE_TIME_TYPE_ID,
                    AeronCounters.CLUSTER_CLUSTERED_SERVICE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID ->
                {
                    // key: cluster id, then service id (ClusterCounters.allocateServiceCounter)
                    final int service = cr.metaDataBuffer().getInt(CountersReader.metaDataOffset(id) + CountersReader.KEY_OFFSET + 4);
                    name = service == 0 ? "service-container" : "service-container-" + service;
                    max = type == AeronCounters.CLUSTER_CLUSTERED_SERVICE_MAX_CYCLE_TIME_TYPE_ID;
                }
                case AeronCounters.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID, AeronCounters.ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID ->
                {
                    // "archive-conductor max cycle time in ns: SHARED", "archive-recorder work cycle ..."
                    final String label = cr.getCounterLabel(id);
                    final int sp = label.indexOf(' ');
                    name = sp > 0 ? label.substring(0, sp) : "archive";
                    max = type == AeronCounters.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID;
                }
                case AeronCounters.CLUSTER_STANDBY_MAX_CYCLE_TIME_TYPE_ID, AeronCounters.CLUSTER_STANDBY_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID ->
                {
                    name = "cluster-standby";
                    max = type == AeronCounters.CLUSTER_STANDBY_MAX_CYCLE_TIME_TYPE_ID;
                }
                case AeronCounters.TRANSITION_MODULE_MAX_CYCLE_TIME_TYPE_ID, AeronCounters.TRANSITION_MODULE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID ->
                {
                    name = "transition-module";
                    max = type == AeronCounters.TRANSITION_MODULE_MAX_CYCLE_TIME_TYPE_ID;
                }
                default ->
                {
                    continue;
                }
            }
            final int[] pair = ids.computeIfAbsent(name, k -> new int[] {-1, -1});
            pair[max ? 0 : 1] = id;
            if (!max)
            {
                thresholds.put(name, threshold(cr.getCounterLabel(id)));
            }
        }
        final List<Agent> out = new ArrayList<>();
        ids.forEach((name, pair) ->
        {
            if (pair[0] >= 0 && pair[1] >= 0)
            {
                out.add(new Agent(name, pair[0], pair[1], thresholds.getOrDefault(name, -1L)));
            }
        });
        return out;
    }

    /** The threshold an exceeded counter's label names (SystemUtil.formatDuration: 100ms, 321us, 7200s), or -1. */
    static long threshold(final String label)
    {
        final Matcher m = THRESHOLD.matcher(label);
        return m.find() ? parseDuration(m.group(1) + m.group(2)) : -1;
    }

    /** A duration as 123ns, 45us, 20ms or 2s. */
    static long parseDuration(final String s)
    {
        final Matcher m = Pattern.compile("(\\d+)(ns|us|ms|s)").matcher(s);
        if (!m.matches())
        {
            throw new IllegalArgumentException("duration " + s + ": want a whole number with ns, us, ms or s, e.g. 20ms");
        }
        final long v = Long.parseLong(m.group(1));
        return switch (m.group(2))
        {
            case "ns" -> v;
            case "us" -> TimeUnit.MICROSECONDS.toNanos(v);
            case "ms" -> TimeUnit.MILLISECONDS.toNanos(v);
            default -> TimeUnit.SECONDS.toNanos(v);
        };
    }

    /**
     * The line for an agent whose counters grew over (fromNs, toNs]: the held time it shows (the new
     * max, and the other counted cycles at the threshold each) and the span it can lie in.
     */
    private void line(final Agent a, final long fromNs, final long toNs, final long wasMax, final long max, final long over)
        throws IOException
    {
        final boolean grew = max > wasMax;
        final long thr = a.thresholdNs;
        final long held;
        final long claim; // the longest single cycle claimed: how far before fromNs it can have begun
        if (grew)
        {
            // every counted cycle was at most the new max, and over the threshold: the max is one of them
            held = max + Math.max(0, over - 1) * Math.max(thr, 0);
            claim = max;
        }
        else if (thr > 0)
        {
            held = over * thr;
            claim = thr;
        }
        else
        {
            return; // a count over an unknown threshold bounds nothing
        }
        final long at = fromNs - claim;
        final long dur = toNs - at;
        final double share = Math.min(1.0, (double)held / dur);
        // the agent first: the analysis quotes the detail of a cause's longest span
        final StringBuilder d = new StringBuilder(128).append(a.name).append(": ");
        if (grew)
        {
            d.append(String.format(Locale.ROOT, "a cycle of %.3f ms (the max, was %.3f ms)", max / 1e6, wasMax / 1e6));
            if (over > 1)
            {
                d.append(String.format(Locale.ROOT, " and %d more over the %.3f ms threshold", over - 1, thr / 1e6));
            }
        }
        else
        {
            d.append(String.format(Locale.ROOT, "%d cycle(s) over the %.3f ms threshold, at least %.3f ms (max unchanged at %.3f ms)",
                over, thr / 1e6, held / 1e6, max / 1e6));
        }
        d.append(String.format(Locale.ROOT, ", ended in the last %.3f ms", (toNs - fromNs) / 1e6));
        out.write(PausesFile.line(at, dur, KIND, SOURCE, a.name, d.toString(), "", share).getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    /** The sampling thread's id (start). */
    long threadId()
    {
        return thread.getId();
    }

    /** The reads so far. */
    int samples()
    {
        return samples;
    }

    /** The agents found at the last scan. */
    List<Agent> agents()
    {
        return agents;
    }

    @Override
    public void close()
    {
        running = false;
        if (thread != null)
        {
            LockSupport.unpark(thread);
            try
            {
                thread.join(1000);
            }
            catch (final InterruptedException e)
            {
                Thread.currentThread().interrupt();
            }
        }
        // a host's read under way finishes before the file closes; none starts after (running)
        while (!reading.compareAndSet(false, true))
        {
            Thread.onSpinWait();
        }
        try
        {
            out.close();
        }
        catch (final IOException e)
        {
            Log.warn("pauses file: " + e.getMessage());
        }
    }
}
