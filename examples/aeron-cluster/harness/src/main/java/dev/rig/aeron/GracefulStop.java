package dev.rig.aeron;

import io.aeron.AeronCounters;
import io.aeron.cluster.ClusteredMediaDriver;
import io.aeron.cluster.service.ClusteredServiceContainer;
import io.aeron.driver.Configuration;
import io.aeron.driver.status.StreamCounter;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.status.CountersReader;

/**
 * The node's stop on SIGTERM or POST /stop: the service container and the consensus module close
 * first, while the media driver stays up until the log publication has sent end-of-stream, so each
 * follower's log image closes at end-of-stream and its consensus module enters an election at once
 * ("log disconnected from leader: eos=true") instead of waiting out the leader heartbeat timeout.
 * Then the archive and the driver close, and a file in the data folder says the mark files left
 * there were closed (so the next launch keeps them: Aeron itself accepts a closed mark file).
 */
final class GracefulStop
{
    /** Written after every part closed; the next launch keeps the mark files when it finds it. */
    static final String CLEAN_STOP_FILE = "clean-stop";
    /** After the log publication has sent everything, end-of-stream rides on the next heartbeats; two, in case one is lost. */
    static final int EOS_HEARTBEATS = 2;
    /** A part that takes longer to close than this is named in the log, once, while the stop waits on. */
    static final long SLOW_PART_NS = TimeUnit.SECONDS.toNanos(5);

    private GracefulStop()
    {
    }

    /** Closes container, consensus module, (end-of-stream), archive and driver in that order; base is the data folder. */
    static void run(final ClusteredMediaDriver driver, final ClusteredServiceContainer container, final String service, final File base)
    {
        final long start = System.nanoTime();
        final StringBuilder took = new StringBuilder();
        close("clustered service " + service + " (service container)", container, took);
        close("consensus module", driver.consensusModule(), took);
        final long holdStart = System.nanoTime();
        final String hold = holdForEndOfStream(driver.mediaDriver().context().countersManager(),
            driver.consensusModule().context().logStreamId(), driver.mediaDriver().context().publicationLingerTimeoutNs());
        took.append(", end-of-stream hold ").append(ms(System.nanoTime() - holdStart)).append(" ms");
        close("archive", driver.archive(), took);
        close("media driver", driver.mediaDriver(), took);
        Log.info("stop: closed in " + ms(System.nanoTime() - start) + " ms (" + took.substring(2) + "); " + hold);
        try
        {
            Files.writeString(new File(base, CLEAN_STOP_FILE).toPath(), Instant.now() + "\n", StandardCharsets.UTF_8);
        }
        catch (final IOException e)
        {
            Log.warn("stop: cannot write " + CLEAN_STOP_FILE + " (the next launch will remove the mark files as stale): " + e);
        }
    }

    /** Closes one part, naming it in the log once if it takes longer than SLOW_PART_NS. */
    private static void close(final String part, final AutoCloseable c, final StringBuilder took)
    {
        final long t0 = System.nanoTime();
        final Thread watch = new Thread(() ->
        {
            try
            {
                Thread.sleep(TimeUnit.NANOSECONDS.toMillis(SLOW_PART_NS));
                Log.warn("stop: the " + part + " has not closed in " + TimeUnit.NANOSECONDS.toSeconds(SLOW_PART_NS) +
                    " s: it cannot be stopped gracefully; the stop waits on (rig's step-down gives up and kills the node)");
            }
            catch (final InterruptedException ignored)
            {
                // closed in time
            }
        }, "stop-watch");
        watch.setDaemon(true);
        watch.start();
        try
        {
            c.close();
        }
        catch (final Exception e)
        {
            Log.warn("stop: closing the " + part + ": " + e);
        }
        finally
        {
            watch.interrupt();
        }
        took.append(", ").append(part.startsWith("clustered service") ? "service container" : part).append(' ')
            .append(ms(System.nanoTime() - t0)).append(" ms");
    }

    /**
     * Holds the media driver until every publication of the log stream has sent all it holds
     * (sender position up to the publisher's) and then EOS_HEARTBEATS publication heartbeats
     * (Configuration.PUBLICATION_HEARTBEAT_TIMEOUT_NS, a constant in Aeron) have gone by, each
     * carrying end-of-stream; never longer than the publication linger timeout in effect, after
     * which the driver would free the publication anyway. Says what it waited for.
     */
    static String holdForEndOfStream(final CountersReader cr, final int logStreamId, final long lingerNs)
    {
        final long start = System.nanoTime();
        final long deadline = start + lingerNs;
        long drained = -1;
        while (System.nanoTime() < deadline)
        {
            if (drained(cr, logStreamId))
            {
                drained = System.nanoTime();
                break;
            }
            sleepMs(1);
        }
        final long heartbeats = EOS_HEARTBEATS * Configuration.PUBLICATION_HEARTBEAT_TIMEOUT_NS;
        if (drained < 0)
        {
            return "the log publication (stream " + logStreamId + ") had not sent everything within the publication linger timeout (" +
                ms(lingerNs) + " ms): followers may see no end-of-stream and wait out their leader heartbeat timeout";
        }
        sleepMs(TimeUnit.NANOSECONDS.toMillis(Math.min(heartbeats, Math.max(0, deadline - drained))));
        return "log publication (stream " + logStreamId + ") sent all in " + ms(drained - start) + " ms, then held " +
            EOS_HEARTBEATS + " publication heartbeats of " + ms(Configuration.PUBLICATION_HEARTBEAT_TIMEOUT_NS) +
            " ms for end-of-stream (bound: publication linger " + ms(lingerNs) + " ms)";
    }

    /** Whether every network publication of the stream has sent up to its publisher's position (none left counts). */
    static boolean drained(final CountersReader cr, final int streamId)
    {
        final Map<Long, long[]> byRegistration = new HashMap<>(); // {publisher position, sender position}
        cr.forEach((counterId, typeId, key, label) ->
        {
            if ((typeId == AeronCounters.DRIVER_PUBLISHER_POS_TYPE_ID || typeId == AeronCounters.DRIVER_SENDER_POSITION_TYPE_ID) &&
                key.getInt(StreamCounter.STREAM_ID_OFFSET) == streamId)
            {
                final long[] p = byRegistration.computeIfAbsent(key.getLong(StreamCounter.REGISTRATION_ID_OFFSET), k -> new long[] {-1, -1});
                p[typeId == AeronCounters.DRIVER_PUBLISHER_POS_TYPE_ID ? 0 : 1] = cr.getCounterValue(counterId);
            }
        });
        for (final long[] p : byRegistration.values())
        {
            // An IPC publication has no sender position: nothing goes over the network.
            if (p[1] >= 0 && p[1] < p[0])
            {
                return false;
            }
        }
        return true;
    }

    private static long ms(final long ns)
    {
        return TimeUnit.NANOSECONDS.toMillis(ns);
    }

    private static void sleepMs(final long ms)
    {
        try
        {
            Thread.sleep(ms);
        }
        catch (final InterruptedException e)
        {
            Thread.currentThread().interrupt();
        }
    }
}
