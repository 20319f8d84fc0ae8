package dev.rig.aeron;

import io.aeron.Publication;
import io.aeron.cluster.client.AeronCluster;
import io.aeron.cluster.client.EgressListener;
import io.aeron.logbuffer.Header;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The reference side of `rig bench gateway` (`start-node.sh --gateway-bench NODE_CONFIG`): a
 * cluster client in its own JVM, attached to the node's own media driver (the one the node's
 * gateway sends through), that sends the load generator's probe orders straight into ingress, so
 * the bench's other side, the same orders over docs/wire.md through the gateway, differs from it
 * by the gateway alone.
 *
 * Standard input holds one phase per line, "RATE SECONDS SPIN_NS IDLE" (messages per second, open
 * loop: message i is due at start + i / RATE); each phase's figures go to standard output as one
 * line, {@link #MARK} and JSON. A message's latency runs from its intended send time to its reply
 * (a late send counts), as the load generator's probes do. Between messages the client polls
 * egress; with nothing to read it waits as IDLE says: "backoff" as the gateway's own cluster-client
 * thread does (spins, yields, then parks from 1 us doubling up to 1 ms), so the two sides differ
 * by what the gateway adds and not by how they wait, or "spin" (never parks: the floor, at a
 * core's cost). Either way it busy-waits the last SPIN_NS before a message is due, as the load
 * generator's load.spin does. End of input ends the client.
 */
final class GatewayBench
{
    /** What starts a result line on standard output (the node's log lines go there too). */
    static final String MARK = "rig-gateway-bench ";
    private static final long GRACE_NS = TimeUnit.SECONDS.toNanos(10);
    private static final long MAX_MESSAGES = 10_000_000;
    private static final String END = new String("end of input"); // compared by identity

    private GatewayBench()
    {
    }

    /** Runs phases read from standard input against the node that config file describes; exits 0 at end of input, 2 on a bad config. */
    static void main(final RigCodec codec, final File config)
    {
        final Node.Config cfg;
        try
        {
            cfg = Node.readConfig(config);
        }
        catch (final IOException | IllegalArgumentException e)
        {
            System.err.println("rig-aeron gateway-bench: config: " + e.getMessage());
            System.exit(2);
            return;
        }
        final Phase[] cur = new Phase[1];
        final Reply reply = new Reply();
        final EgressListener listener = new EgressListener()
        {
            @Override
            public void onMessage(final long sessionId, final long timestamp, final DirectBuffer b, final int off, final int len,
                final Header header)
            {
                final long now = System.nanoTime();
                reply.reset();
                final Phase p = cur[0];
                if (p != null && codec.decodeEgress(b, off, len, reply))
                {
                    p.answer(reply.correlationId, now, reply.status == Reply.OK);
                }
            }
        };
        int status = 0;
        try (AeronCluster client = AeronCluster.connect(new AeronCluster.Context()
            .aeronDirectoryName(Node.aeronDir(cfg))
            .ingressChannel("aeron:udp?term-length=16m")
            .ingressEndpoints(cfg.ingressEndpoints())
            .egressChannel("aeron:udp?endpoint=" + cfg.clientHost() + ":0")
            .egressListener(listener)
            .credentialsSupplier(RunAuth.ingressCredentials(RunAuth.fromEnvironment())));
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)))
        {
            // Input is read on a thread of its own: between phases this one keeps the session
            // alive (the cluster closes a session that says nothing for its session timeout).
            final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
            final Thread reader = new Thread(() ->
            {
                try
                {
                    String l;
                    while ((l = in.readLine()) != null)
                    {
                        lines.add(l);
                    }
                }
                catch (final IOException e)
                {
                    System.err.println("rig-aeron gateway-bench: read standard input: " + e);
                }
                lines.add(END);
            }, "gateway-bench-input");
            reader.setDaemon(true);
            reader.start();
            emit("{\"ready\":true,\"leader\":" + client.leaderMemberId() + "}");
            for (int n = 1; ; n++)
            {
                final String line = next(client, lines);
                if (line == END)
                {
                    break;
                }
                final String[] f = line.trim().split("\\s+");
                final double rate;
                final double seconds;
                final long spinNs;
                try
                {
                    if (f.length != 4 || !(f[3].equals("backoff") || f[3].equals("spin")))
                    {
                        throw new NumberFormatException();
                    }
                    rate = Double.parseDouble(f[0]);
                    seconds = Double.parseDouble(f[1]);
                    spinNs = Long.parseLong(f[2]);
                }
                catch (final NumberFormatException e)
                {
                    emit("{\"error\":" + Json.str("phase " + line + ": want \"RATE SECONDS SPIN_NS backoff|spin\"") + "}");
                    continue;
                }
                final long count = Math.round(rate * seconds);
                if (!(rate > 0) || count < 1 || count > MAX_MESSAGES || spinNs < 0)
                {
                    emit("{\"error\":" + Json.str("phase " + line + ": want a rate > 0, 1.." + MAX_MESSAGES + " messages, SPIN_NS >= 0") + "}");
                    continue;
                }
                final Phase p = new Phase(n, (int)count, 1e9 / rate);
                cur[0] = p;
                run(codec, client, p, spinNs, f[3].equals("spin"));
                cur[0] = null;
                emit(p.json(rate));
            }
        }
        catch (final Exception e)
        {
            System.err.println("rig-aeron gateway-bench: " + e);
            status = 1;
        }
        System.exit(status);
    }

    /** The next input line (END at its end), keeping the session alive meanwhile. */
    private static String next(final AeronCluster client, final LinkedBlockingQueue<String> lines) throws InterruptedException
    {
        while (true)
        {
            final String line = lines.poll(100, TimeUnit.MILLISECONDS);
            if (line != null)
            {
                return line;
            }
            if (client.isClosed())
            {
                throw new IllegalStateException("the cluster session closed");
            }
            client.pollEgress();
            client.sendKeepAlive();
        }
    }

    private static void emit(final String json)
    {
        System.out.println(MARK + json);
        System.out.flush();
    }

    /** One phase: send every message at its due time, polling egress in between, then await the rest. */
    private static void run(final RigCodec codec, final AeronCluster client, final Phase p, final long spinNs, final boolean spin)
    {
        final Backoff idle = new Backoff();
        final WireOrder order = new WireOrder();
        final UnsafeBuffer msg = new UnsafeBuffer(new byte[256]);
        final long start = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(10);
        for (int i = 0; i < p.intended.length; i++)
        {
            final long due = start + (long)(i * p.everyNs);
            p.intended[i] = due;
            long now;
            while ((now = System.nanoTime()) < due)
            {
                if (client.pollEgress() > 0)
                {
                    idle.reset();
                }
                else if (spin || due - now <= spinNs)
                {
                    Thread.onSpinWait();
                }
                else
                {
                    idle.idle(due - now - spinNs);
                }
            }
            // The load generator's probe: an IOC buy at price 1 that crosses nothing.
            order.id = p.corr(i);
            order.instrument = i % 16;
            order.side = WireOrder.BUY;
            order.timeInForce = WireOrder.IOC;
            order.market = false;
            order.price = 1;
            order.quantity = 1;
            final int len = codec.encodeOrder(order.id, order, msg, 0);
            if (len < 0)
            {
                throw new IllegalStateException("the codec does not encode orders");
            }
            long res;
            while ((res = client.offer(msg, 0, len)) < 0)
            {
                if (res != Publication.BACK_PRESSURED && res != Publication.ADMIN_ACTION)
                {
                    throw new IllegalStateException("ingress offer: " + Publication.errorString(res));
                }
                p.backPressured++;
                client.pollEgress();
            }
            p.lag[i] = System.nanoTime() - due;
            idle.reset(); // a send is work, as in the gateway's loop
        }
        final long until = System.nanoTime() + GRACE_NS;
        while (p.answered < p.intended.length && System.nanoTime() < until)
        {
            if (client.pollEgress() == 0)
            {
                LockSupport.parkNanos(50_000);
            }
        }
    }

    /**
     * The gateway's idle strategy (BackoffIdleStrategy(10, 20, 1 us, 1 ms)), its park capped so a
     * message is not sent late.
     */
    static final class Backoff
    {
        private static final int SPINS = 10;
        private static final int YIELDS = 20;
        private static final long MIN_PARK_NS = 1_000;
        private static final long MAX_PARK_NS = 1_000_000;
        private int idles;
        private long parkNs = MIN_PARK_NS;

        void idle(final long atMostNs)
        {
            if (idles < SPINS)
            {
                idles++;
                Thread.onSpinWait();
            }
            else if (idles < SPINS + YIELDS)
            {
                idles++;
                Thread.yield();
            }
            else
            {
                LockSupport.parkNanos(Math.min(parkNs, atMostNs));
                parkNs = Math.min(parkNs << 1, MAX_PARK_NS);
            }
        }

        void reset()
        {
            idles = 0;
            parkNs = MIN_PARK_NS;
        }
    }

    /** One phase's schedule and what came back. */
    static final class Phase
    {
        final long base;
        final double everyNs;
        final long[] intended;
        final long[] latency;
        final long[] lag;
        int answered;
        int rejected;
        long backPressured;

        Phase(final int n, final int count, final double everyNs)
        {
            base = (1L << 62) | ((long)n << 32); // apart from the load generator's order ids
            this.everyNs = everyNs;
            intended = new long[count];
            latency = new long[count];
            lag = new long[count];
        }

        long corr(final int i)
        {
            return base | i;
        }

        void answer(final long corr, final long now, final boolean ok)
        {
            final long i = corr - base;
            if (i < 0 || i >= intended.length || latency[(int)i] != 0 || intended[(int)i] == 0)
            {
                return;
            }
            latency[(int)i] = Math.max(1, now - intended[(int)i]);
            answered++;
            rejected += ok ? 0 : 1;
        }

        String json(final double rate)
        {
            final long[] lat = new long[answered];
            int k = 0;
            for (final long l : latency)
            {
                if (l != 0 && k < lat.length)
                {
                    lat[k++] = l;
                }
            }
            Arrays.sort(lat);
            final long[] lags = lag.clone();
            Arrays.sort(lags);
            final StringBuilder sb = new StringBuilder(256).append('{');
            Json.field(sb, "rate", Math.round(rate));
            Json.field(sb, "sent", intended.length);
            Json.field(sb, "answered", answered);
            Json.field(sb, "rejected", rejected);
            Json.field(sb, "back_pressured", backPressured);
            Json.field(sb, "p50_ns", pct(lat, 0.50));
            Json.field(sb, "p99_ns", pct(lat, 0.99));
            Json.field(sb, "max_ns", lat.length == 0 ? 0 : lat[lat.length - 1]);
            Json.field(sb, "lag_p50_ns", pct(lags, 0.50));
            Json.field(sb, "lag_p99_ns", pct(lags, 0.99));
            Json.close(sb);
            return sb.toString();
        }

        /** The nearest-rank percentile of sorted v; 0 when empty. */
        static long pct(final long[] v, final double q)
        {
            return v.length == 0 ? 0 : v[(int)Math.min(v.length - 1, Math.max(0, Math.ceil(q * v.length) - 1))];
        }
    }
}
