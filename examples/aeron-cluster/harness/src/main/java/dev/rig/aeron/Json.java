package dev.rig.aeron;

import java.util.List;

/** Just enough JSON writing for /status: fields appended with a trailing comma that close() drops. */
final class Json
{
    private Json()
    {
    }

    static String str(final String s)
    {
        final StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++)
        {
            final char c = s.charAt(i);
            switch (c)
            {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default ->
                {
                    if (c < 0x20)
                    {
                        sb.append(String.format("\\u%04x", (int)c));
                    }
                    else
                    {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"').toString();
    }

    static String strings(final List<String> l)
    {
        final StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < l.size(); i++)
        {
            sb.append(i > 0 ? "," : "").append(str(l.get(i)));
        }
        return sb.append(']').toString();
    }

    static void field(final StringBuilder sb, final String k, final String v)
    {
        sb.append(str(k)).append(':').append(str(v)).append(',');
    }

    static void field(final StringBuilder sb, final String k, final long v)
    {
        sb.append(str(k)).append(':').append(v).append(',');
    }

    static void field(final StringBuilder sb, final String k, final double v)
    {
        sb.append(str(k)).append(':').append(Double.isFinite(v) ? String.format("%.3f", v) : "0").append(',');
    }

    static void field(final StringBuilder sb, final String k, final boolean v)
    {
        sb.append(str(k)).append(':').append(v).append(',');
    }

    /** Ends an object opened with '{', dropping the last field's comma. */
    static void close(final StringBuilder sb)
    {
        if (sb.charAt(sb.length() - 1) == ',')
        {
            sb.setLength(sb.length() - 1);
        }
        sb.append('}');
    }
}
