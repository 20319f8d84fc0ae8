package dev.rig.aeron;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.aeron.AeronCounters;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.status.SystemCounterDescriptor;
import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.channels.DatagramChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.agrona.concurrent.status.CountersReader;

/**
 * GET /transport (engine.AdminTransport, engine/contract.go): the media driver's counters now, read
 * from its counters file as AeronStat reads them (every system counter by its name in snake case:
 * nak_messages_sent, retransmits_sent, loss_gap_fills, flow_control_under_runs, short_sends,
 * errors ...; and publication_back_pressure_events, the sum of the publications' snd-bpe counters),
 * the node's UDP receive errors from /proc/net/snmp, and the transport settings in effect: the
 * receiver window, the socket receive buffer asked and as the kernel granted it, the term length,
 * net.core.rmem_max. rig samples it around each burst and reports the deltas per burst.
 */
final class TransportCounters implements HttpHandler
{
    static final String PATH = "/transport";
    static final String BACK_PRESSURE = "publication_back_pressure_events";

    private final byte[] token;
    private final Supplier<CountersReader> counters;
    private final Supplier<MediaDriver.Context> driver;

    /** driver is the launched media driver's context: null until launch has concluded it. */
    TransportCounters(final byte[] token, final Supplier<CountersReader> counters, final Supplier<MediaDriver.Context> driver)
    {
        this.token = token.clone();
        this.counters = counters;
        this.driver = driver;
    }

    @Override
    public void handle(final HttpExchange ex) throws IOException
    {
        try
        {
            if (!Admin.authorized(ex, token))
            {
                return;
            }
            if (!ex.getRequestMethod().equals("GET") || !ex.getRequestURI().getPath().equals(PATH))
            {
                Admin.reply(ex, 404, "{\"error\":" + Json.str("no " + ex.getRequestMethod() + " " + ex.getRequestURI().getPath() + "; want GET " + PATH) + "}");
                return;
            }
            final CountersReader cr = counters.get();
            final MediaDriver.Context md = driver.get();
            if (cr == null || md == null)
            {
                Admin.reply(ex, 503, "{\"error\":\"the media driver is not up yet\"}");
                return;
            }
            Admin.reply(ex, 200, json(cr, md));
        }
        finally
        {
            ex.close();
        }
    }

    /** The answer: counters, UDP errors and settings, as engine.TransportCounters. */
    static String json(final CountersReader cr, final MediaDriver.Context md)
    {
        final StringBuilder sb = new StringBuilder(2048).append('{');
        Json.field(sb, "time", Instant.now().toString());
        sb.append("\"counters\":{");
        read(cr).forEach((k, v) -> Json.field(sb, k, v));
        Json.close(sb);
        sb.append(',');
        final Map<String, Long> udp = snmpUdp();
        Json.field(sb, "udp_rcvbuf_errors", udp.getOrDefault("RcvbufErrors", 0L));
        Json.field(sb, "udp_in_errors", udp.getOrDefault("InErrors", 0L));
        if (md != null)
        {
            sb.append("\"settings\":{");
            settings(md).forEach((k, v) -> Json.field(sb, k, v));
            Json.close(sb);
        }
        final BurstProbe probe = BurstProbe.current();
        if (probe != null)
        {
            sb.append(sb.charAt(sb.length() - 1) == ',' ? "" : ",").append("\"burst_receive\":").append(probe.json()).append(',');
        }
        Json.close(sb);
        return sb.toString();
    }

    /** Every system counter by name, and the publications' back-pressure events summed. */
    static Map<String, Long> read(final CountersReader cr)
    {
        final Map<String, Long> out = new TreeMap<>();
        final long[] bpe = {0};
        cr.forEach((id, typeId, key, label) ->
        {
            if (typeId == AeronCounters.DRIVER_SYSTEM_COUNTER_TYPE_ID)
            {
                final SystemCounterDescriptor d = SystemCounterDescriptor.get(key.getInt(0));
                if (d != null)
                {
                    out.put(d.name().toLowerCase(java.util.Locale.ROOT), cr.getCounterValue(id));
                }
            }
            else if (typeId == AeronCounters.DRIVER_SENDER_BPE_TYPE_ID)
            {
                bpe[0] += cr.getCounterValue(id);
            }
        });
        out.put(BACK_PRESSURE, bpe[0]);
        return out;
    }

    /** The transport settings in effect: what the driver's context holds, and what the kernel grants a socket. */
    static Map<String, Long> settings(final MediaDriver.Context md)
    {
        final Map<String, Long> out = new TreeMap<>();
        out.put(io.aeron.driver.Configuration.INITIAL_WINDOW_LENGTH_PROP_NAME, (long)md.initialWindowLength());
        out.put(io.aeron.driver.Configuration.SOCKET_RCVBUF_LENGTH_PROP_NAME, (long)md.socketRcvbufLength());
        out.put(io.aeron.driver.Configuration.SOCKET_SNDBUF_LENGTH_PROP_NAME, (long)md.socketSndbufLength());
        out.put(io.aeron.driver.Configuration.TERM_BUFFER_LENGTH_PROP_NAME, (long)md.publicationTermBufferLength());
        out.put("so_rcvbuf_granted", granted(md.socketRcvbufLength()));
        out.put("net.core.rmem_max", Node.sysctl("/proc/sys/net/core/rmem_max", -1));
        return out;
    }

    /**
     * SO_RCVBUF as the kernel grants it to a UDP socket that asks for {@code asked} bytes (0: the
     * kernel's default), as getsockopt reports it (Linux doubles what it grants, for its overhead).
     * The JDK halves Linux's getsockopt figure for SO_RCVBUF (it returns what was asked under the
     * clamp), so it is doubled back here: the figure every engine reports and rig halves.
     */
    static long granted(final int asked)
    {
        try (DatagramChannel ch = DatagramChannel.open())
        {
            if (asked > 0)
            {
                ch.setOption(StandardSocketOptions.SO_RCVBUF, asked);
            }
            return 2L * ch.getOption(StandardSocketOptions.SO_RCVBUF);
        }
        catch (final IOException e)
        {
            return -1;
        }
    }

    /** The Udp: counters of /proc/net/snmp by name (empty where there is no such file). */
    static Map<String, Long> snmpUdp()
    {
        final Map<String, Long> out = new TreeMap<>();
        try
        {
            final List<String> lines = Files.readAllLines(Path.of("/proc/net/snmp"), StandardCharsets.US_ASCII);
            for (int i = 0; i + 1 < lines.size(); i++)
            {
                if (lines.get(i).startsWith("Udp:") && lines.get(i + 1).startsWith("Udp:"))
                {
                    final String[] names = lines.get(i).trim().split("\\s+");
                    final String[] values = lines.get(i + 1).trim().split("\\s+");
                    for (int k = 1; k < Math.min(names.length, values.length); k++)
                    {
                        out.put(names[k], Long.parseLong(values[k]));
                    }
                    break;
                }
            }
        }
        catch (final IOException | NumberFormatException e)
        {
            // not Linux, or an unreadable file: no UDP figures
        }
        return out;
    }
}
