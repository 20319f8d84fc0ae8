package dev.rig.aeron;

import io.aeron.Aeron;
import io.aeron.FragmentAssembler;
import io.aeron.Subscription;
import io.aeron.cluster.codecs.MessageHeaderDecoder;
import io.aeron.cluster.codecs.SessionMessageHeaderDecoder;
import io.aeron.logbuffer.Header;
import java.time.Instant;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.BackoffIdleStrategy;

/**
 * A burst's receive path on the leader, before consensus: a plain Aeron subscription on the node's
 * own ingress channel and stream, beside the consensus module's, so it reads the very datagrams the
 * consensus module reads, as the micro-burst guide's receiver does (latency = arrival - send time
 * for every message). Each burst message carries a trailer ({@link #stamp}): its burst, sender and
 * number, the burst's scheduled start and the time it was first offered, both in Unix nanoseconds
 * (so the sender's and this node's clocks must agree: one machine, or synchronised clocks).
 *
 * Aeron's receiver window follows the slowest subscriber of an image, so the probe polls on a
 * thread of its own and does little per message; it is on only where the node is started with
 * -Drig.burst.probe=true (the micro-burst playbooks), never behind a run that does not ask for it.
 * GET /transport reports what it received per burst (burst_receive), which rig reads after each burst.
 */
final class BurstProbe implements AutoCloseable
{
    static final String PROPERTY = "rig.burst.probe";
    /** "rigBurst": marks a burst message's trailer. */
    static final long MAGIC = 0x7269674275727374L;
    /** magic, burst, sender and number, scheduled start, first offer. */
    static final int TRAILER = 8 + 8 + 4 + 4 + 8 + 8;
    /** Bursts kept (the most recent by number): rig reads each within seconds of its end. */
    static final int KEEP = 16;
    private static final int PAYLOAD = MessageHeaderDecoder.ENCODED_LENGTH + SessionMessageHeaderDecoder.BLOCK_LENGTH;

    private static volatile BurstProbe current;

    private final Subscription subscription;
    private final Thread thread;
    private final long offsetNs = epochNanos() - System.nanoTime();
    private final MessageHeaderDecoder header = new MessageHeaderDecoder();
    private final TreeMap<Long, Received> bursts = new TreeMap<>();
    private volatile boolean running = true;

    /** One burst's arrivals: per message, latency from its first offer and from the burst's start, and arrival time. */
    static final class Received
    {
        int n;
        long[] fromOffer = new long[1024];
        long[] fromStart = new long[1024];
        long[] arrival = new long[1024];
        int summarised = -1;
        String json;

        void add(final long fromOfferNs, final long fromStartNs, final long arrivalNs)
        {
            if (n == arrival.length)
            {
                fromOffer = Arrays.copyOf(fromOffer, n * 2);
                fromStart = Arrays.copyOf(fromStart, n * 2);
                arrival = Arrays.copyOf(arrival, n * 2);
            }
            fromOffer[n] = fromOfferNs;
            fromStart[n] = fromStartNs;
            arrival[n++] = arrivalNs;
        }
    }

    /** subscription: null for a probe fed by {@link #onMessage} alone. */
    BurstProbe(final Subscription subscription)
    {
        this.subscription = subscription;
        this.thread = new Thread(this::poll, "burst-probe");
        this.thread.setDaemon(true);
    }

    /** The probe started at launch, or null. */
    static BurstProbe current()
    {
        return current;
    }

    /** Whether this node's start asks for the probe. */
    static boolean wanted()
    {
        return Boolean.getBoolean(PROPERTY);
    }

    /**
     * Subscribes to the ingress endpoint's stream with the consensus module's own parameters
     * (rejoin=false, reliable=true: a subscription that differs would clash with it on the shared
     * endpoint) and polls it on a thread of its own.
     */
    static BurstProbe start(final Aeron aeron, final String ingressEndpoint, final int streamId)
    {
        final String channel = "aeron:udp?endpoint=" + ingressEndpoint + "|rejoin=false|reliable=true";
        final BurstProbe p = new BurstProbe(aeron.addSubscription(channel, streamId));
        p.thread.start();
        current = p;
        Log.info("burst probe on " + channel + " stream " + streamId + " (" + PROPERTY + "): GET /transport reports burst_receive");
        return p;
    }

    /** Writes a burst message's trailer into buf's last {@link #TRAILER} bytes before end. */
    static void stamp(final MutableDirectBuffer buf, final int end, final long burst, final int sender, final int number,
        final long startUnixNs, final long offeredUnixNs)
    {
        final int at = end - TRAILER;
        buf.putLong(at, MAGIC);
        buf.putLong(at + 8, burst);
        buf.putInt(at + 16, sender);
        buf.putInt(at + 20, number);
        buf.putLong(at + 24, startUnixNs);
        buf.putLong(at + 32, offeredUnixNs);
    }

    /** One ingress message (SBE header, session header, then the client's payload), arrived at nowUnixNs. */
    void onMessage(final DirectBuffer buf, final int offset, final int length, final long nowUnixNs)
    {
        if (length < PAYLOAD + TRAILER)
        {
            return;
        }
        header.wrap(buf, offset);
        if (header.templateId() != SessionMessageHeaderDecoder.TEMPLATE_ID || header.schemaId() != MessageHeaderDecoder.SCHEMA_ID)
        {
            return;
        }
        final int at = offset + length - TRAILER;
        if (buf.getLong(at) != MAGIC)
        {
            return;
        }
        final long burst = buf.getLong(at + 8);
        final long start = buf.getLong(at + 24);
        final long offered = buf.getLong(at + 32);
        synchronized (bursts)
        {
            Received r = bursts.get(burst);
            if (r == null)
            {
                r = new Received();
                bursts.put(burst, r);
                while (bursts.size() > KEEP)
                {
                    bursts.pollFirstEntry();
                }
            }
            r.add(nowUnixNs - offered, nowUnixNs - start, nowUnixNs);
        }
    }

    private void poll()
    {
        final FragmentAssembler assembler = new FragmentAssembler(
            (final DirectBuffer b, final int off, final int len, final Header h) -> onMessage(b, off, len, System.nanoTime() + offsetNs));
        final BackoffIdleStrategy idle = new BackoffIdleStrategy(100, 10, 1_000, 50_000);
        while (running)
        {
            try
            {
                idle.idle(subscription.poll(assembler, 256));
            }
            catch (final RuntimeException e)
            {
                if (!running || subscription.isClosed())
                {
                    return;
                }
                Log.warn("burst probe: " + e);
            }
        }
    }

    /**
     * burst_receive of GET /transport: per burst kept, the messages received, first and last
     * arrival, the most in any 1 ms, and latency p50/p99/max from each message's first offer and
     * from the burst's scheduled start (engine.BurstReceive).
     */
    String json()
    {
        final StringBuilder sb = new StringBuilder(256).append('[');
        synchronized (bursts)
        {
            for (final Map.Entry<Long, Received> e : bursts.entrySet())
            {
                final Received r = e.getValue();
                if (r.summarised != r.n)
                {
                    r.json = summary(e.getKey(), r);
                    r.summarised = r.n;
                }
                sb.append(sb.length() > 1 ? "," : "").append(r.json);
            }
        }
        return sb.append(']').toString();
    }

    static String summary(final long burst, final Received r)
    {
        final int n = r.n;
        final long[] offer = Arrays.copyOf(r.fromOffer, n);
        final long[] start = Arrays.copyOf(r.fromStart, n);
        final long[] arrival = Arrays.copyOf(r.arrival, n);
        Arrays.sort(offer);
        Arrays.sort(start);
        final int peak = BurstClient.Figures.peakPerMs(arrival); // sorts arrival
        final StringBuilder sb = new StringBuilder(320).append('{');
        Json.field(sb, "burst", burst);
        Json.field(sb, "received", n);
        Json.field(sb, "first_unix_ns", n > 0 ? arrival[0] : 0);
        Json.field(sb, "last_unix_ns", n > 0 ? arrival[n - 1] : 0);
        Json.field(sb, "peak_per_ms", peak);
        Json.field(sb, "p50_ns", pct(offer, 0.50));
        Json.field(sb, "p99_ns", pct(offer, 0.99));
        Json.field(sb, "max_ns", n > 0 ? offer[n - 1] : 0);
        Json.field(sb, "from_start_p50_ns", pct(start, 0.50));
        Json.field(sb, "from_start_p99_ns", pct(start, 0.99));
        Json.field(sb, "from_start_max_ns", n > 0 ? start[n - 1] : 0);
        Json.close(sb);
        return sb.toString();
    }

    /** The q-quantile of sorted (nearest rank); 0 when empty. */
    static long pct(final long[] sorted, final double q)
    {
        final int n = sorted.length;
        return n == 0 ? 0 : sorted[(int)Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))];
    }

    /** Now, in ns since the Unix epoch: the harness's one wall clock for the files rig reads. */
    static long epochNanos()
    {
        final Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    @Override
    public void close()
    {
        running = false;
        if (current == this)
        {
            current = null;
        }
        try
        {
            thread.join(1_000);
        }
        catch (final InterruptedException e)
        {
            Thread.currentThread().interrupt();
        }
        if (subscription != null)
        {
            subscription.close();
        }
    }
}
