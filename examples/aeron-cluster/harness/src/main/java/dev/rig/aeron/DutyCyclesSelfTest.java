package dev.rig.aeron;

import io.aeron.AeronCounters;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersManager;

/**
 * HarnessSelfTest's checks of the duty-cycle sampler (DutyCycles) on a counters file laid out as
 * Aeron 1.51's agents lay theirs out, and, run on its own (main), the sampler's cost: per sample in
 * a timing loop, and a real sampling thread's CPU over a stretch of wall time at an interval
 * (arguments: seconds, default 10; interval, default DutyCycles'), beside a thread that only parks.
 */
final class DutyCyclesSelfTest
{
    private static int failed;

    private DutyCyclesSelfTest()
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

    /** A counters file with every agent's pair of counters (ids in order: see below) and filler counters of other types. */
    static CountersManager counters(final int filler)
    {
        final CountersManager cm = new CountersManager(new UnsafeBuffer(ByteBuffer.allocateDirect(1 << 20)),
            new UnsafeBuffer(ByteBuffer.allocateDirect(128 * 1024)));
        final UnsafeBuffer key = new UnsafeBuffer(new byte[8]);
        final int[][] sys = {
            {AeronCounters.SYSTEM_COUNTER_ID_CONDUCTOR_MAX_CYCLE_TIME, AeronCounters.SYSTEM_COUNTER_ID_CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED},
            {AeronCounters.SYSTEM_COUNTER_ID_SENDER_MAX_CYCLE_TIME, AeronCounters.SYSTEM_COUNTER_ID_SENDER_CYCLE_TIME_THRESHOLD_EXCEEDED},
            {AeronCounters.SYSTEM_COUNTER_ID_RECEIVER_MAX_CYCLE_TIME, AeronCounters.SYSTEM_COUNTER_ID_RECEIVER_CYCLE_TIME_THRESHOLD_EXCEEDED},
        };
        for (final int[] p : sys)
        {
            key.putInt(0, p[0]);
            alloc(cm, AeronCounters.DRIVER_SYSTEM_COUNTER_TYPE_ID, key, "max cycle time in ns: SHARED");
            key.putInt(0, p[1]);
            alloc(cm, AeronCounters.DRIVER_SYSTEM_COUNTER_TYPE_ID, key, "work cycle time exceeded count: threshold=100ms SHARED");
        }
        key.putInt(0, AeronCounters.SYSTEM_COUNTER_ID_NAME_RESOLVER_MAX_TIME); // not a duty cycle
        alloc(cm, AeronCounters.DRIVER_SYSTEM_COUNTER_TYPE_ID, key, "Name resolution max time");
        key.putInt(0, 0);
        key.putInt(4, 0);
        alloc(cm, AeronCounters.CLUSTER_MAX_CYCLE_TIME_TYPE_ID, key, "Cluster max cycle time in ns - clusterId=0");
        alloc(cm, AeronCounters.CLUSTER_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID, key, "Cluster work cycle time exceeded count: threshold=10ms - clusterId=0");
        alloc(cm, AeronCounters.CLUSTER_CLUSTERED_SERVICE_MAX_CYCLE_TIME_TYPE_ID, key, "Cluster container max cycle time in ns - clusterId=0 serviceId=0");
        alloc(cm, AeronCounters.CLUSTER_CLUSTERED_SERVICE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID, key,
            "Cluster container work cycle time exceeded count: threshold=100ms - clusterId=0 serviceId=0");
        alloc(cm, AeronCounters.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID, key, "archive-conductor max cycle time in ns: SHARED - archiveId=0");
        alloc(cm, AeronCounters.ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID, key,
            "archive-conductor work cycle time exceeded count: threshold=100ms SHARED - archiveId=0");
        alloc(cm, AeronCounters.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID, key, "archive-recorder max cycle time in ns: DEDICATED - archiveId=0"); // no pair
        for (int i = 0; i < filler; i++)
        {
            alloc(cm, AeronCounters.DRIVER_SENDER_POSITION_TYPE_ID, key, "snd-pos: " + i);
        }
        return cm;
    }

    private static int alloc(final CountersManager cm, final int type, final UnsafeBuffer key, final String label)
    {
        return cm.allocate(label, type, b -> b.putBytes(0, key, 0, 8));
    }

    /** Runs every check; the number that failed. */
    static int run() throws IOException
    {
        final CountersManager cm = counters(100);
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final DutyCycles d = new DutyCycles(cm, out);
        final long ms = 1_000_000L;
        d.sample(1000 * ms);
        final List<DutyCycles.Agent> agents = d.agents();
        final List<String> names = agents.stream().map(DutyCycles.Agent::name).toList();
        check("duty cycles: every agent with both counters is found, by Aeron's type ids",
            names.equals(List.of("driver-conductor", "driver-sender", "driver-receiver", "consensus-module", "service-container", "archive-conductor")) &&
                agents.get(3).thresholdNs() == 10 * ms && agents.get(0).thresholdNs() == 100 * ms,
            agents.toString());

        final DutyCycles.Agent cmAgent = agents.get(3);
        final DutyCycles.Agent svc = agents.get(4);
        cm.setCounterValue(svc.maxId(), 5 * ms); // before the first read: the baseline
        cm.setCounterValue(cmAgent.maxId(), 40 * ms);
        final DutyCycles d2 = new DutyCycles(cm, out);
        d2.sample(1000 * ms);
        d2.sample(1020 * ms);
        check("duty cycles: no line while nothing grew (the first read is the baseline)", out.size() == 0, out.toString());

        cm.setCounterValue(svc.maxId(), 95 * ms);
        cm.setCounterValue(svc.exceededId(), 0);
        d2.sample(1040 * ms);
        final String grew = out.toString(StandardCharsets.UTF_8);
        // a 95 ms cycle ended in (1.020, 1.040] s: it lies in [1.020 − 0.095, 1.040] s, 95 of 115 ms
        check("duty cycles: a max that grew is one cycle of that length, spread over where it can lie",
            grew.equals("{\"at_ns\":" + 925 * ms + ",\"dur_ns\":" + 115 * ms + ",\"kind\":\"duty_cycle\",\"source\":\"aeron_counters\"," +
                "\"thread\":\"service-container\",\"detail\":\"service-container: a cycle of 95.000 ms (the max, was 5.000 ms), ended in the last 20.000 ms\"," +
                "\"share\":0.826087}\n"),
            grew);

        out.reset();
        cm.setCounterValue(cmAgent.exceededId(), 3);
        d2.sample(1060 * ms);
        final String counted = out.toString(StandardCharsets.UTF_8);
        // three cycles over 10 ms ended in (1.040, 1.060] s: at least 30 ms, in [1.030, 1.060] s
        check("duty cycles: a count alone is a lower bound, count × threshold",
            counted.contains("\"at_ns\":" + 1030 * ms + ",\"dur_ns\":" + 30 * ms) && counted.contains("\"thread\":\"consensus-module\"") &&
                counted.contains("consensus-module: 3 cycle(s) over the 10.000 ms threshold, at least 30.000 ms (max unchanged at 40.000 ms)") && counted.contains("\"share\":1.000000"),
            counted);

        out.reset();
        cm.setCounterValue(svc.maxId(), 300 * ms);
        cm.setCounterValue(svc.exceededId(), 2);
        d2.sample(1500 * ms); // a late read
        final String both = out.toString(StandardCharsets.UTF_8);
        // the 300 ms max is one of the two counted cycles; the other is over 100 ms: 400 ms in [0.760, 1.500] s
        check("duty cycles: a max and a count together: the max and the other counted cycles at the threshold",
            both.contains("\"at_ns\":" + 760 * ms + ",\"dur_ns\":" + 740 * ms) && both.contains("and 1 more over the 100.000 ms threshold") &&
                both.contains("\"share\":0.540541"),
            both);

        boolean refused = false;
        try
        {
            System.setProperty(DutyCycles.INTERVAL_PROP, "20");
            DutyCycles.intervalNs();
        }
        catch (final IllegalArgumentException e)
        {
            refused = e.getMessage().contains(DutyCycles.INTERVAL_PROP) && e.getMessage().contains("20ms");
        }
        finally
        {
            System.clearProperty(DutyCycles.INTERVAL_PROP);
        }
        check("duty cycles: an interval without a unit is refused, naming the property and a valid value", refused, "");
        hosted();
        return failed;
    }

    /** An idle strategy that counts its calls and never sleeps. */
    private static final class Counting implements IdleStrategy
    {
        int calls;

        @Override
        public void idle(final int workCount)
        {
            calls++;
        }

        @Override
        public void idle()
        {
            calls++;
        }

        @Override
        public void reset()
        {
        }

        @Override
        public String alias()
        {
            return "counting";
        }
    }

    /**
     * The reads riding on a host agent's cycles (DutyCycles.Host), on an injected clock: one read per
     * interval however often the host cycles, a busy host's clock read only every BUSY_CHECK_EVERY
     * cycles, a stall placed from the read before it, the host's own idle strategy still called
     * every cycle, and no read before attach or after close.
     */
    private static void hosted() throws IOException
    {
        final long ms = 1_000_000L;
        final long[] now = {0};
        final int[] clockReads = {0};
        final DutyCycles.Host host = new DutyCycles.Host(() ->
        {
            clockReads[0]++;
            return now[0];
        });
        final Counting base = new Counting();
        final IdleStrategy idle = host.wrap(() -> base).get();
        check("duty cycles hosted: the host's runner took the wrapped idle strategy, its alias kept",
            host.hosting() && idle.alias().equals("counting"), idle.alias());

        final CountersManager cm = counters(100);
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final DutyCycles d = new DutyCycles(cm, out, 20 * ms);
        for (int i = 0; i < 10; i++)
        {
            idle.idle(0);
        }
        check("duty cycles hosted: no read before the sampler is attached", d.samples() == 0 && base.calls == 10, "reads " + d.samples());

        host.attach(d);
        // an idle host: a cycle every millisecond (Aeron's backoff parks at most 1 ms) for 200 ms
        for (int t = 0; t < 200; t++)
        {
            now[0] = t * ms;
            idle.idle(0);
        }
        check("duty cycles hosted: an idle host cycling every 1 ms reads once every 20 ms (10 reads in 200 ms), its own idle called each cycle",
            d.samples() == 10 && base.calls == 210, "reads " + d.samples() + ", host idles " + base.calls);

        // a 70 ms stall of the service container ending at 235 ms: the reads at 220 and 240 ms bound it
        final DutyCycles.Agent svc = d.agents().get(4);
        out.reset();
        for (int t = 200; t < 250; t++)
        {
            now[0] = t * ms;
            if (t == 235)
            {
                cm.setCounterValue(svc.maxId(), 70 * ms);
            }
            idle.idle(0);
        }
        final String line = out.toString(StandardCharsets.UTF_8);
        // reads at 200, 220 and 240 ms: the line at 240, from 220 − 70 ms
        check("duty cycles hosted: a stall is read within an interval of its end and spread over [previous read − its length, read]",
            line.contains("\"at_ns\":" + d.epochNs(150 * ms) + ",\"dur_ns\":" + 90 * ms) && line.contains("ended in the last 20.000 ms"),
            line);

        // a busy host: a cycle every microsecond for 100 ms, all with work
        final int readsBefore = d.samples();
        clockReads[0] = 0;
        final int cycles = 100_000;
        for (int i = 0; i < cycles; i++)
        {
            now[0] = 300 * ms + i * 1000L;
            idle.idle(1);
        }
        final int busyReads = d.samples() - readsBefore;
        check("duty cycles hosted: a busy host reads the clock every " + DutyCycles.Host.BUSY_CHECK_EVERY + " cycles and still reads once every 20 ms",
            clockReads[0] == cycles / DutyCycles.Host.BUSY_CHECK_EVERY && busyReads == 5,
            "clock reads " + clockReads[0] + " in " + cycles + " cycles, reads " + busyReads);

        d.close();
        final int readsAtClose = d.samples();
        now[0] = 1000 * ms;
        idle.idle(0);
        check("duty cycles hosted: no read after close", d.samples() == readsAtClose, "reads " + d.samples());
    }

    /**
     * The sampler's cost: a timing loop of samples over a counters file of 100 other counters beside
     * the agents' (nothing grows: the common case), and a sampling thread at the default interval for
     * a stretch of wall time, its CPU time from the JVM; with the load average.
     */
    public static void main(final String[] args) throws Exception
    {
        final long seconds = args.length > 0 ? Long.parseLong(args[0]) : 10;
        final long interval = args.length > 1 ? DutyCycles.parseDuration(args[1]) : DutyCycles.DEFAULT_INTERVAL_NS;
        final CountersManager cm = counters(100);
        final DutyCycles d = new DutyCycles(cm, OutputStream.nullOutputStream());
        for (int i = 0; i < 200_000; i++)
        {
            d.sample(i);
        }
        final int n = 1_000_000;
        final long t0 = System.nanoTime();
        for (int i = 0; i < n; i++)
        {
            d.sample(i);
        }
        final double perSample = (System.nanoTime() - t0) / (double)n;
        System.out.printf(Locale.ROOT, "loop: %.0f ns per sample (%d agents, a rescan every %d samples), load %s%n",
            perSample, d.agents().size(), DutyCycles.RESCAN_EVERY, loadavg());

        // The wrapped idle call when no read is due: what every cycle of the host pays.
        final DutyCycles.Host loopHost = new DutyCycles.Host();
        final Counting counting = new Counting();
        final IdleStrategy wrapped = loopHost.wrap(() -> counting).get();
        final DutyCycles far = new DutyCycles(cm, OutputStream.nullOutputStream(), Long.MAX_VALUE / 2);
        loopHost.attach(far);
        for (int i = 0; i < 2_000_000; i++)
        {
            wrapped.idle(0);
        }
        final long c0 = System.nanoTime();
        for (int i = 0; i < n; i++)
        {
            wrapped.idle(0);
        }
        final double perCall = (System.nanoTime() - c0 - 0.0) / n;
        System.out.printf(Locale.ROOT, "loop: %.1f ns per idle call of a host when no read is due (the clock and the check), load %s%n",
            perCall, loadavg());

        // Side by side for the same wall time: the sampler on a thread of its own (before), the same
        // reads hosted by a thread cycling as Aeron's backoff idle strategy does when idle (parks of
        // up to 1 ms), and that host alone without the reads; and a thread that only parks at the interval.
        final Path tmp = Files.createTempFile("duty-cost", ".ndjson");
        final ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        final Thread idle = new Thread(() ->
        {
            while (!Thread.currentThread().isInterrupted())
            {
                LockSupport.parkNanos(interval);
            }
        }, "park-only");
        final DutyCycles.Host host = new DutyCycles.Host();
        final DutyCycles hostedReads = new DutyCycles(cm, OutputStream.nullOutputStream(), interval);
        host.attach(hostedReads);
        final Thread hosting = hostLoop("host-with-reads", host.wrap(BackoffIdleStrategy::new).get());
        final Thread bare = hostLoop("host-alone", new BackoffIdleStrategy());
        // and a host whose reads are never due: the wrapper's clock checks alone
        final DutyCycles.Host checkHost = new DutyCycles.Host();
        checkHost.attach(new DutyCycles(cm, OutputStream.nullOutputStream(), Long.MAX_VALUE / 2));
        final Thread checking = hostLoop("host-checks", checkHost.wrap(BackoffIdleStrategy::new).get());
        for (final Thread t : List.of(idle, hosting, bare, checking))
        {
            t.setDaemon(true);
            t.start();
        }
        try (DutyCycles live = DutyCycles.start(cm, tmp.toFile(), interval))
        {
            LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(1));
            final String load0 = loadavg();
            final long[] tids = {live.threadId(), idle.getId(), hosting.getId(), bare.getId(), checking.getId()};
            final long[] cpu0 = new long[tids.length];
            for (int i = 0; i < tids.length; i++)
            {
                cpu0[i] = mx.getThreadCpuTime(tids[i]);
            }
            final int liveReads0 = live.samples();
            final int hostedReads0 = hostedReads.samples();
            final long w0 = System.nanoTime();
            LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(seconds));
            final long[] cpu = new long[tids.length];
            for (int i = 0; i < tids.length; i++)
            {
                cpu[i] = mx.getThreadCpuTime(tids[i]) - cpu0[i];
            }
            final long wall = System.nanoTime() - w0;
            final int liveReads = live.samples() - liveReads0;
            final int hostedN = hostedReads.samples() - hostedReads0;
            System.out.printf(Locale.ROOT, "before, a thread of its own at %d ms: %d reads, %.1f us CPU a read (wake-up included), %.3f %% of a core; " +
                "a thread that only parks: %.1f us a wake-up, %.3f %%%n",
                interval / 1_000_000, liveReads, cpu[0] / (double)liveReads / 1e3, 100.0 * cpu[0] / wall,
                cpu[1] / (double)liveReads / 1e3, 100.0 * cpu[1] / wall);
            System.out.printf(Locale.ROOT, "after, hosted by a backoff-idle thread: %d reads; host with reads %.3f %% of a core, host alone %.3f %%, " +
                "host with the checks and no read %.3f %%; difference %.3f %% (reads x loop cost: %.4f %%); over %d s, load %s -> %s%n",
                hostedN, 100.0 * cpu[2] / wall, 100.0 * cpu[3] / wall, 100.0 * cpu[4] / wall, 100.0 * (cpu[2] - cpu[3]) / wall,
                100.0 * hostedN * perSample / wall, seconds, load0, loadavg());
        }
        finally
        {
            for (final Thread t : List.of(idle, hosting, bare, checking))
            {
                t.interrupt();
            }
            Files.deleteIfExists(tmp);
        }
    }

    private static Thread hostLoop(final String name, final IdleStrategy s)
    {
        return new Thread(() ->
        {
            while (!Thread.currentThread().isInterrupted())
            {
                s.idle(0);
            }
        }, name);
    }

    private static String loadavg()
    {
        try
        {
            return Files.readString(Path.of("/proc/loadavg")).trim();
        }
        catch (final IOException e)
        {
            return "?";
        }
    }
}
