package dev.rig.aeron;

import java.util.Locale;

/**
 * The node folder's pauses file (rig's rundir.PausesFile): the always-on record of the node's
 * pauses and phases, one rundir.InsideSpan JSON line per span, appended by each of its writers
 * (DutyCycles, PhaseLog) one whole line at a time, so their lines do not interleave.
 */
final class PausesFile
{
    /** The file's name in the node folder. */
    static final String NAME = "pauses.ndjson";

    private PausesFile()
    {
    }

    /**
     * One span as a line (newline included): thread and blocks left out where empty, share where
     * 0 (a span held whole).
     */
    static String line(final long atNs, final long durNs, final String kind, final String source, final String thread,
        final String detail, final String blocks, final double share)
    {
        final StringBuilder sb = new StringBuilder(256).append('{');
        Json.field(sb, "at_ns", atNs);
        Json.field(sb, "dur_ns", Math.max(0, durNs));
        Json.field(sb, "kind", kind);
        Json.field(sb, "source", source);
        if (!thread.isEmpty())
        {
            Json.field(sb, "thread", thread);
        }
        Json.field(sb, "detail", detail);
        if (!blocks.isEmpty())
        {
            Json.field(sb, "blocks", blocks);
        }
        if (share > 0)
        {
            sb.append("\"share\":").append(String.format(Locale.ROOT, "%.6f", share)).append(',');
        }
        Json.close(sb);
        return sb.append('\n').toString();
    }
}
