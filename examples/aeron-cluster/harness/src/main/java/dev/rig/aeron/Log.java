package dev.rig.aeron;

import java.time.Instant;

/** Lines on stdout (the agent's engine.log) stamped in ISO 8601, so rig can quote them at a latency spike. */
public final class Log
{
    private Log()
    {
    }

    public static void info(final String msg)
    {
        line("INFO", msg);
    }

    public static void warn(final String msg)
    {
        line("WARN", msg);
    }

    public static void error(final String msg, final Throwable t)
    {
        line("ERROR", msg + (t == null ? "" : ": " + t));
        if (t != null)
        {
            t.printStackTrace(System.out);
        }
    }

    private static synchronized void line(final String level, final String msg)
    {
        System.out.println(Instant.now() + " " + level + " " + msg);
        System.out.flush();
    }

    /** Logs why and ends the JVM at once: a node that cannot hold its state must not stay up. */
    public static void fatal(final String msg, final Throwable t)
    {
        error("FATAL " + msg, t);
        Runtime.getRuntime().halt(70);
    }
}
