package dev.rig.aeron;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * The node's own account of its scheduled work, one span per phase as it ends, appended to the
 * node folder's pauses file (rig's rundir.PausesFile, one rundir.InsideSpan JSON line each, source
 * engine_phases): a snapshot's capture on the service thread, a launch's restore, joining, replay
 * and catch-up until ready. A few lines a run, so always on. The service thread only hands a span
 * over; a daemon thread of its own writes it, so a take waits on no file of this.
 */
final class PhaseLog
{
    /** What a phase held up (rundir.BlocksApply, rundir.BlocksReady). */
    static final String BLOCKS_APPLY = "apply";
    static final String BLOCKS_READY = "ready";
    static final String BLOCKS_NONE = "";

    /** Ends the writer (compared by identity: no span is this string). */
    @SuppressWarnings("StringOperationCanBeSimplified")
    private static final String END = new String("end");

    private final BlockingQueue<String> queue = new ArrayBlockingQueue<>(64);
    private final FileOutputStream out;
    private final Thread writer;

    private PhaseLog(final FileOutputStream out)
    {
        this.out = out;
        writer = new Thread(this::write, "rig-phase-log");
        writer.setDaemon(true);
        writer.start();
    }

    /**
     * Writes what is queued (the spans of a stop's last take among them) and closes the file,
     * waiting at most a second: a span added after it is not written.
     */
    void close()
    {
        try
        {
            if (queue.offer(END, 1, java.util.concurrent.TimeUnit.SECONDS))
            {
                writer.join(1000);
            }
        }
        catch (final InterruptedException e)
        {
            Thread.currentThread().interrupt();
        }
        try
        {
            out.close();
        }
        catch (final IOException e)
        {
            Log.warn("engine phases file not closed: " + e);
        }
    }

    /** Appends to dir's pauses file; null (nothing recorded, said in the log) where it cannot be opened. */
    static PhaseLog open(final File dir)
    {
        try
        {
            return new PhaseLog(new FileOutputStream(new File(dir, PausesFile.NAME), true));
        }
        catch (final IOException e)
        {
            Log.warn("engine phases not recorded: " + e);
            return null;
        }
    }

    /** The epoch ns of a System.nanoTime() reading taken earlier. */
    static long epochNsOf(final long nanoTime)
    {
        return BurstProbe.epochNanos() - (System.nanoTime() - nanoTime);
    }

    /** One phase of durNs from atNs (epoch ns); dropped, not waited for, if the writer is stuck. */
    void add(final String kind, final String blocks, final long atNs, final long durNs, final String detail)
    {
        queue.offer(PausesFile.line(atNs, durNs, kind, "engine_phases", "", detail, blocks, 0));
    }

    private void write()
    {
        while (true)
        {
            try
            {
                // One whole line per append: the file's other writers' lines do not interleave.
                final String line = queue.take();
                if (line == END)
                {
                    return;
                }
                out.write(line.getBytes(StandardCharsets.UTF_8));
            }
            catch (final InterruptedException e)
            {
                return;
            }
            catch (final IOException e)
            {
                Log.warn("engine phase not recorded: " + e);
            }
        }
    }
}
