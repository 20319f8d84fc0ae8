package dev.rig.aeron;

import io.aeron.Publication;
import io.aeron.cluster.client.AeronCluster;
import io.aeron.cluster.client.EgressListener;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.Header;
import java.io.File;
import java.io.FileReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * A burst through the cluster's own ingress (`start-node.sh --burst REQUEST`, run by rig on a
 * client node): each of the request's senders is a cluster client with a media driver of its own,
 * as a user's gateway has, and at each burst's due time offers the burst's messages into ingress
 * in a loop with no pacing (polling egress between offers, never waiting for it). Every message is
 * the service's own order (through the user's {@link RigCodec}: an IOC buy at the lowest price,
 * crossing nothing) padded to the request's size, its correlation id the message's number in the
 * burst and its padding a {@link BurstProbe} trailer: the burst's scheduled start and the time the
 * message was first offered, in Unix nanoseconds, which the leader's probe reads on arrival. A
 * message's reply latency runs from its first offer (so a back-pressured offer's wait counts) to its
 * reply, and from the burst's scheduled start (so the wait of the messages behind it counts too).
 * The figures go to the request's out file as rig's BurstStats (rundir/loadgen.go), transport "aeron".
 */
final class BurstClient
{
    private static final long GRACE_NS = TimeUnit.SECONDS.toNanos(10);
    private static final int POLL_EVERY = 16;

    /** The request rig writes (properties). */
    record Request(List<Node.Peer> peers, String host, int messages, int size, int count, long everyNs, long startUnixNs, int senders,
        long firstBurst, long price, String out, boolean credentialsOnStdin)
    {
        static Request read(final File f) throws IOException
        {
            final Properties p = new Properties();
            try (Reader r = new FileReader(f, StandardCharsets.UTF_8))
            {
                p.load(r);
            }
            final List<Node.Peer> peers = new ArrayList<>();
            for (int i = 0; p.getProperty("peer." + i) != null; i++)
            {
                final String[] parts = p.getProperty("peer." + i).split(",");
                if (parts.length != 3)
                {
                    throw new IllegalArgumentException(f + ": peer." + i + ": want node,raft_addr,client_addr");
                }
                peers.add(new Node.Peer(parts[0].trim(), parts[1].trim(), parts[2].trim()));
            }
            if (peers.isEmpty())
            {
                throw new IllegalArgumentException(f + ": no peer.0");
            }
            return new Request(peers, p.getProperty("host", "127.0.0.1"), num(p, f, "messages"), num(p, f, "size"), num(p, f, "count"),
                Long.parseLong(p.getProperty("every_ns", "0")), Long.parseLong(p.getProperty("start_unix_ns", "0")), num(p, f, "senders"),
                Long.parseLong(p.getProperty("first_burst", "0")), Long.parseLong(p.getProperty("price", "1")), p.getProperty("out"),
                "stdin".equals(p.getProperty("credentials")));
        }

        private static int num(final Properties p, final File f, final String key)
        {
            final String v = p.getProperty(key);
            try
            {
                final int n = Integer.parseInt(v == null ? "" : v.trim());
                if (n > 0)
                {
                    return n;
                }
            }
            catch (final NumberFormatException ignored)
            {
                // said below
            }
            throw new IllegalArgumentException(f + ": " + key + " = " + v + ": want a positive integer");
        }
    }

    /** One burst as one sender saw it: per message, when it was first offered and when its reply came (0: none). */
    static final class Seen
    {
        final long[] sent;
        final long[] answered;
        /** The burst's scheduled start (this JVM's nanoTime). */
        long start;
        long lastOffer;
        long backPressured;
        Map<String, Long> countersBefore;
        Map<String, Long> countersAfter;

        Seen(final int n)
        {
            sent = new long[n];
            answered = new long[n];
        }
    }

    private BurstClient()
    {
    }

    /** Runs the request in file, then exits: 0 when every burst was sent, 1 otherwise, 2 on a bad request. */
    static void main(final RigCodec codec, final File file)
    {
        final Request req;
        final RunAuth auth;
        try
        {
            req = Request.read(file);
            auth = credentials(req);
        }
        catch (final IOException | IllegalArgumentException e)
        {
            System.err.println("rig-aeron burst: " + e.getMessage());
            System.exit(2);
            return;
        }
        final long epochNs = BurstProbe.epochNanos();
        final long nano0 = System.nanoTime();
        final long start = req.startUnixNs() > 0 ? nano0 + (req.startUnixNs() - epochNs) : nano0 + TimeUnit.SECONDS.toNanos(1);
        final Seen[][] seen = new Seen[req.senders()][req.count()];
        final String[] errors = new String[req.senders()];
        final CyclicBarrier connected = new CyclicBarrier(req.senders());
        final List<Thread> threads = new ArrayList<>();
        for (int s = 0; s < req.senders(); s++)
        {
            final int sender = s;
            final Thread t = new Thread(() ->
            {
                try
                {
                    send(codec, req, auth, sender, start, epochNs - nano0, seen[sender], connected);
                }
                catch (final Throwable e)
                {
                    errors[sender] = e.toString();
                    connected.reset();
                    Log.warn("burst sender " + sender + ": " + e);
                }
            }, "burst-sender-" + s);
            threads.add(t);
            t.start();
        }
        for (final Thread t : threads)
        {
            try
            {
                t.join();
            }
            catch (final InterruptedException e)
            {
                Thread.currentThread().interrupt();
            }
        }
        final String json = stats(req, seen, errors, epochNs - nano0, start);
        try
        {
            final File out = new File(req.out());
            if (out.getParentFile() != null)
            {
                Files.createDirectories(out.getParentFile().toPath());
            }
            Files.writeString(out.toPath(), json);
        }
        catch (final IOException e)
        {
            System.err.println("rig-aeron burst: write " + req.out() + ": " + e);
            System.exit(1);
        }
        System.exit(Arrays.stream(errors).allMatch(e -> e == null) ? 0 : 1);
    }

    /**
     * The run's credentials for the ingress: read as the first line of standard input where the
     * request says so (credentials=stdin: the runner pipes the run's secret, so it is in no file,
     * argv or environment of a remote shell), else from the environment; null: none.
     */
    private static RunAuth credentials(final Request req) throws IOException
    {
        if (!req.credentialsOnStdin())
        {
            return RunAuth.fromEnvironment();
        }
        final String line = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        if (line == null || line.isBlank())
        {
            throw new IllegalArgumentException("credentials=stdin, but standard input holds no secret");
        }
        return new RunAuth(line.strip().getBytes(StandardCharsets.UTF_8));
    }

    /** One sender: its own media driver and cluster client, then every burst of the series. */
    private static void send(final RigCodec codec, final Request req, final RunAuth auth, final int sender, final long start,
        final long offsetNs, final Seen[] seen, final CyclicBarrier connected) throws Exception
    {
        final String dir = System.getProperty("java.io.tmpdir") + "/rig-burst-" + ProcessHandle.current().pid() + "-" + sender;
        final MediaDriver.Context mdc = new MediaDriver.Context()
            .aeronDirectoryName(dir)
            .threadingMode(ThreadingMode.valueOf(System.getProperty("aeron.threading.mode", ThreadingMode.SHARED.name())))
            .dirDeleteOnStart(true)
            .dirDeleteOnShutdown(true)
            .termBufferSparseFile(true);
        final long[] current = {-1};
        final Seen[] cur = new Seen[1];
        final WireOrder order = new WireOrder();
        final Reply reply = new Reply();
        final EgressListener listener = new EgressListener()
        {
            @Override
            public void onMessage(final long sessionId, final long timestamp, final DirectBuffer b, final int off, final int len,
                final Header header)
            {
                reply.reset();
                if (!codec.decodeEgress(b, off, len, reply))
                {
                    return;
                }
                final long id = reply.correlationId;
                final Seen s = cur[0];
                if (s != null && (id >>> 32) == current[0])
                {
                    final int i = (int)(id & 0xffffffffL);
                    if (i >= 0 && i < s.answered.length && s.answered[i] == 0)
                    {
                        s.answered[i] = System.nanoTime();
                    }
                }
            }
        };
        try (MediaDriver driver = MediaDriver.launchEmbedded(mdc);
            AeronCluster client = AeronCluster.connect(new AeronCluster.Context()
                .aeronDirectoryName(driver.aeronDirectoryName())
                .ingressChannel("aeron:udp?term-length=" + System.getProperty("aeron.term.buffer.length", "16m"))
                .ingressEndpoints(Gateway.ingressEndpoints(req.peers(), Node.INGRESS_PORT_OFFSET))
                .egressChannel("aeron:udp?endpoint=" + req.host() + ":0")
                .egressListener(listener)
                .credentialsSupplier(RunAuth.ingressCredentials(auth))))
        {
            connected.await(30, TimeUnit.SECONDS);
            final UnsafeBuffer msg = new UnsafeBuffer(new byte[Math.max(req.size(), 256 + BurstProbe.TRAILER)]);
            final BackoffIdleStrategy idle = new BackoffIdleStrategy(10, 20, 1_000, 100_000);
            for (int k = 0; k < req.count(); k++)
            {
                final long due = start + k * req.everyNs();
                while (System.nanoTime() < due - 2_000_000)
                {
                    client.pollEgress();
                    LockSupport.parkNanos(500_000);
                }
                final Seen s = new Seen(req.messages());
                s.start = due;
                s.countersBefore = TransportCounters.read(client.context().aeron().countersReader());
                current[0] = req.firstBurst() + k;
                cur[0] = s;
                while (System.nanoTime() < due)
                {
                    Thread.onSpinWait();
                }
                for (int i = 0; i < req.messages(); i++)
                {
                    order.id = (1L << 61) | ((long)sender << 52) | ((current[0] & 0xfffffL) << 32) | i; // apart from rig's own ids
                    order.instrument = i % 16;
                    order.side = WireOrder.BUY;
                    order.timeInForce = WireOrder.IOC;
                    order.market = false;
                    order.price = req.price();
                    order.quantity = 1;
                    final long t0 = System.nanoTime();
                    final int len = codec.encodeOrder((current[0] << 32) | i, order, msg, 0);
                    if (len < 0)
                    {
                        throw new IllegalStateException("the codec does not encode orders");
                    }
                    final int total = Math.max(len + BurstProbe.TRAILER, req.size());
                    BurstProbe.stamp(msg, total, current[0], sender, i, due + offsetNs, t0 + offsetNs);
                    s.sent[i] = t0;
                    long res;
                    while ((res = client.offer(msg, 0, total)) < 0)
                    {
                        if (res == Publication.BACK_PRESSURED || res == Publication.ADMIN_ACTION)
                        {
                            s.backPressured++;
                            client.pollEgress();
                            continue;
                        }
                        throw new IllegalStateException("ingress offer: " + Publication.errorString(res));
                    }
                    if (i % POLL_EVERY == 0)
                    {
                        client.pollEgress();
                    }
                }
                s.lastOffer = System.nanoTime();
                seen[k] = s;
                // Replies until every message is answered, the next burst is near, or the grace ends.
                final long until = k + 1 < req.count() ? Math.min(start + (k + 1) * req.everyNs() - 5_000_000, s.lastOffer + GRACE_NS)
                    : s.lastOffer + GRACE_NS;
                int answered = 0;
                while (answered < req.messages() && System.nanoTime() < until)
                {
                    if (client.pollEgress() == 0)
                    {
                        idle.idle();
                        answered = 0;
                        for (final long a : s.answered)
                        {
                            answered += a != 0 ? 1 : 0;
                        }
                    }
                    else
                    {
                        idle.reset();
                    }
                }
                s.countersAfter = TransportCounters.read(client.context().aeron().countersReader());
                cur[0] = null;
            }
        }
    }

    /** The series as rig's BurstStats JSON. offsetNs turns this JVM's nanoTime into Unix nanoseconds. */
    static String stats(final Request req, final Seen[][] seen, final String[] errors, final long offsetNs, final long start)
    {
        final StringBuilder sb = new StringBuilder(4096).append('{');
        Json.field(sb, "messages", req.messages());
        Json.field(sb, "every_ns", req.everyNs());
        Json.field(sb, "count", req.count());
        Json.field(sb, "phase", "done");
        Json.field(sb, "transport", "aeron");
        Json.field(sb, "size", req.size());
        Json.field(sb, "senders", req.senders());
        Json.field(sb, "target", Gateway.ingressEndpoints(req.peers(), Node.INGRESS_PORT_OFFSET));
        long sentAll = 0, answeredAll = 0;
        int peakAll = 0;
        sb.append("\"bursts\":[");
        for (int k = 0; k < req.count(); k++)
        {
            final List<Seen> per = new ArrayList<>();
            for (final Seen[] s : seen)
            {
                if (s[k] != null)
                {
                    per.add(s[k]);
                }
            }
            if (per.isEmpty())
            {
                continue;
            }
            final Figures f = Figures.of(per);
            sentAll += f.sent;
            answeredAll += f.answered;
            peakAll = Math.max(peakAll, f.sendPeakPerMs);
            sb.append('{');
            Json.field(sb, "index", k);
            Json.field(sb, "burst", req.firstBurst() + k);
            Json.field(sb, "due", Instant.ofEpochSecond(0, start + k * req.everyNs() + offsetNs).toString());
            Json.field(sb, "sent", f.sent);
            Json.field(sb, "send_ns", f.sendNs);
            Json.field(sb, "peak_per_ms", f.sendPeakPerMs);
            Json.field(sb, "drain_ns", f.drainNs);
            Json.field(sb, "answered", f.answered);
            Json.field(sb, "lost", f.sent - f.answered);
            Json.field(sb, "max_latency_ns", f.maxNs);
            Json.field(sb, "p50_latency_ns", f.p50Ns);
            Json.field(sb, "p99_latency_ns", f.p99Ns);
            Json.field(sb, "p99_from_start_ns", f.p99FromStartNs);
            Json.field(sb, "answered_peak_per_ms", f.answeredPeakPerMs);
            Json.field(sb, "back_pressured", f.backPressured);
            sb.append("\"client_counters\":{");
            f.counters.forEach((name, v) -> Json.field(sb, name, v));
            Json.close(sb);
            sb.append(',');
            Json.close(sb);
            sb.append(',');
        }
        if (sb.charAt(sb.length() - 1) == ',')
        {
            sb.setLength(sb.length() - 1);
        }
        sb.append("],");
        Json.field(sb, "sent", sentAll);
        Json.field(sb, "answered", answeredAll);
        Json.field(sb, "lost", sentAll - answeredAll);
        Json.field(sb, "peak_per_ms", peakAll);
        final StringBuilder err = new StringBuilder();
        for (int s = 0; s < errors.length; s++)
        {
            if (errors[s] != null)
            {
                err.append(err.length() > 0 ? "; " : "").append("sender ").append(s).append(": ").append(errors[s]);
            }
        }
        if (err.length() > 0)
        {
            Json.field(sb, "error", err.toString());
        }
        Json.close(sb);
        return sb.toString();
    }

    /** One burst's figures over its senders. */
    static final class Figures
    {
        int sent;
        int answered;
        long sendNs;
        long drainNs;
        int sendPeakPerMs;
        int answeredPeakPerMs;
        long p50Ns;
        long p99Ns;
        long maxNs;
        long p99FromStartNs;
        long backPressured;
        final Map<String, Long> counters = new java.util.TreeMap<>();

        static Figures of(final List<Seen> per)
        {
            final Figures f = new Figures();
            long first = Long.MAX_VALUE, lastSend = Long.MIN_VALUE, lastReply = Long.MIN_VALUE;
            int n = 0, a = 0;
            for (final Seen s : per)
            {
                n += s.sent.length;
                for (final long t : s.answered)
                {
                    a += t != 0 ? 1 : 0;
                }
            }
            final long[] sends = new long[n];
            final long[] replies = new long[a];
            final long[] lat = new long[a];
            final long[] fromStart = new long[a];
            int i = 0, j = 0;
            for (final Seen s : per)
            {
                for (int m = 0; m < s.sent.length; m++)
                {
                    sends[i++] = s.sent[m];
                    first = Math.min(first, s.sent[m]);
                    lastSend = Math.max(lastSend, s.sent[m]);
                    if (s.answered[m] != 0)
                    {
                        replies[j] = s.answered[m];
                        fromStart[j] = s.answered[m] - s.start;
                        lat[j++] = s.answered[m] - s.sent[m];
                        lastReply = Math.max(lastReply, s.answered[m]);
                    }
                }
                f.backPressured += s.backPressured;
                if (s.countersBefore != null && s.countersAfter != null)
                {
                    s.countersAfter.forEach((name, v) -> f.counters.merge(name, v - s.countersBefore.getOrDefault(name, 0L), Long::sum));
                }
            }
            f.sent = n;
            f.answered = a;
            f.sendNs = n > 0 ? lastSend - first : 0;
            f.drainNs = a > 0 ? Math.max(lastReply, lastSend) - first : 0;
            f.sendPeakPerMs = peakPerMs(sends);
            f.answeredPeakPerMs = peakPerMs(replies);
            Arrays.sort(lat);
            if (a > 0)
            {
                f.p50Ns = lat[(int)Math.min(a - 1, Math.ceil(0.50 * a) - 1)];
                f.p99Ns = lat[(int)Math.min(a - 1, Math.ceil(0.99 * a) - 1)];
                f.maxNs = lat[a - 1];
                Arrays.sort(fromStart);
                f.p99FromStartNs = BurstProbe.pct(fromStart, 0.99);
            }
            return f;
        }

        /** The most times in any 1 ms window (sorts times). */
        static int peakPerMs(final long[] times)
        {
            Arrays.sort(times);
            int best = 0;
            for (int lo = 0, hi = 0; hi < times.length; hi++)
            {
                while (times[hi] - times[lo] >= 1_000_000)
                {
                    lo++;
                }
                best = Math.max(best, hi - lo + 1);
            }
            return best;
        }
    }
}
