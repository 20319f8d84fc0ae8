package dev.rig.aeron;

import io.aeron.AeronCounters;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.agrona.concurrent.status.CountersReader;

/**
 * Aeron's duty-cycle stall counters, sampled through the whole run: every agent's max cycle time
 * and cycle-time-threshold-exceeded count (the media driver's conductor, sender and receiver, the
 * consensus module, the clustered service container, the archive's conductor, recorder and
 * replayer), read from the counters file as AeronStat reads them, on a thread of their own. A line
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

    DutyCycles(final CountersReader cr, final OutputStream out)
    {
        this.cr = cr;
        this.out = out;
        final Instant now = Instant.now();
        this.monoBaseNs = System.nanoTime();
        this.epochBaseNs = now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    /** Samples cr every interval on a daemon thread, appending to pausesFile. */
    static DutyCycles start(final CountersReader cr, final File pausesFile, final long intervalNs) throws IOException
    {
        final DutyCycles d = new DutyCycles(cr, new FileOutputStream(pausesFile, true));
        d.thread = new Thread(() -> d.loop(intervalNs), "rig-duty-cycles");
        d.thread.setDaemon(true);
        d.thread.start();
        return d;
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
        return epochBaseNs + (System.nanoTime() - monoBaseNs);
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
